use super::*;

/// A clap-side mirror accepts exactly the names its domain enum is known by, so
/// `--flush fsync` means FlushMethod::Fsync and the lists cannot drift apart.
#[test]
fn mirrors_accept_the_domain_names() {
    for a in FlushArg::value_variants() {
        let m = FlushMethod::from(*a);
        assert_eq!(a.to_possible_value().unwrap().get_name(), m.name());
        assert_eq!(m.name().parse::<FlushMethod>().unwrap(), m);
    }
    assert_eq!(FlushArg::value_variants().len(), FlushMethod::ALL.len());
    for a in PlacementArg::value_variants() {
        let p = Placement::from(*a);
        assert_eq!(a.to_possible_value().unwrap().get_name(), p.name());
        assert_eq!(p.to_string().parse::<Placement>().unwrap(), p);
    }
    assert_eq!(PlacementArg::value_variants().len(), Placement::ALL.len());
    assert!("bogus".parse::<FlushMethod>().is_err());
    assert!("bogus".parse::<Placement>().is_err());
}
