//! Answering an HTTP server's 401: Basic (RFC 7617) or Digest (RFC 7616: MD5, SHA-256,
//! SHA-512-256 and their -sess forms, qop auth or none; the hashes from `digest_auth`).
//!
//! Why Digest at all: Shelly Gen2+ plugs with a password speak only Digest (SHA-256, the
//! device id as realm), and so do many generic switches. Why never Basic unasked: a
//! password sent as Basic to a Digest server crosses the lab network in the clear.

use super::error::PowerError;
use digest_auth::{AuthContext, HttpMethod, WwwAuthenticateHeader};

/// A user and password from the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Login {
    pub user: String,
    pub password: String,
}

/// What the server asked for in its last 401.
#[derive(Clone, Debug)]
pub enum Challenge {
    /// No 401 seen yet: requests go without credentials.
    None,
    Basic {
        realm: Option<String>,
    },
    Digest(Box<WwwAuthenticateHeader>),
}

impl Challenge {
    /// The Authorization header for one request, if any.
    pub fn answer(
        &mut self,
        login: &Login,
        host: &str,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Option<String>, PowerError> {
        Ok(match self {
            Challenge::None => None,
            Challenge::Basic { .. } => Some(format!(
                "Basic {}",
                base64(format!("{}:{}", login.user, login.password).as_bytes())
            )),
            Challenge::Digest(prompt) => {
                let ctx = AuthContext::new_with_method(
                    login.user.as_str(),
                    login.password.as_str(),
                    path,
                    body.map(str::as_bytes),
                    HttpMethod(method.to_string().into()),
                );
                // `respond` counts the nonce's uses (nc) itself.
                let header = prompt
                    .respond(&ctx)
                    .map_err(|e| PowerError::DigestChallenge {
                        host: host.to_string(),
                        message: e.to_string(),
                    })?;
                Some(header.to_header_string())
            }
        })
    }

    pub fn scheme(&self) -> &'static str {
        match self {
            Challenge::None => "no challenge",
            Challenge::Basic { .. } => "Basic",
            Challenge::Digest(_) => "Digest",
        }
    }

    pub fn realm(&self) -> Option<&str> {
        match self {
            Challenge::None => None,
            Challenge::Basic { realm } => realm.as_deref(),
            Challenge::Digest(p) => Some(&p.realm),
        }
    }
}

/// The challenge to answer from a 401's `WWW-Authenticate` headers: a Digest one we can
/// compute (the strongest hash first), else Basic. A 401 that names no scheme at all is
/// answered with Basic, as old plugs expect. A Digest challenge whose algorithm we do not
/// know, with nothing else offered, is an error that names the algorithm.
/// `headers` are the 401's, names lowercase.
pub fn choose(headers: &[(String, String)], host: &str) -> Result<Challenge, PowerError> {
    let offered: Vec<&str> = headers
        .iter()
        .filter(|(k, _)| k == "www-authenticate")
        .map(|(_, v)| v.trim())
        .collect();
    let mut best: Option<WwwAuthenticateHeader> = None;
    let mut unknown: Option<String> = None;
    let mut basic: Option<Challenge> = None;
    for v in &offered {
        let (scheme, rest) = v.split_once(' ').unwrap_or((v, ""));
        if scheme.eq_ignore_ascii_case("digest") {
            match digest_auth::parse(rest) {
                Ok(p) => {
                    if best.as_ref().is_none_or(|b| strength(&p) > strength(b)) {
                        best = Some(p);
                    }
                }
                Err(digest_auth::Error::UnknownAlgorithm(a)) => unknown = Some(a),
                Err(e) => {
                    return Err(PowerError::DigestChallenge {
                        host: host.to_string(),
                        message: format!("{e} in \"{v}\""),
                    });
                }
            }
        } else if scheme.eq_ignore_ascii_case("basic") {
            basic = Some(Challenge::Basic {
                realm: param(rest, "realm"),
            });
        }
    }
    if let Some(p) = best {
        return Ok(Challenge::Digest(Box::new(p)));
    }
    if let Some(b) = basic {
        return Ok(b);
    }
    if let Some(algorithm) = unknown {
        return Err(PowerError::DigestAlgorithm {
            host: host.to_string(),
            algorithm,
        });
    }
    if let Some(v) = offered.first() {
        return Err(PowerError::AuthScheme {
            host: host.to_string(),
            offered: crate::model::peer_text::shown_prefix(v.as_bytes(), 120),
        });
    }
    Ok(Challenge::Basic { realm: None })
}

fn strength(p: &WwwAuthenticateHeader) -> u8 {
    use digest_auth::AlgorithmType::*;
    match p.algorithm.algo {
        MD5 => 0,
        SHA2_256 => 1,
        SHA2_512_256 => 2,
    }
}

/// A quoted or bare parameter of a challenge (`realm="x"`).
fn param(s: &str, name: &str) -> Option<String> {
    s.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

pub(crate) fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                o.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unauthorized(challenges: &[&str]) -> Vec<(String, String)> {
        challenges
            .iter()
            .map(|c| ("www-authenticate".to_string(), c.to_string()))
            .collect()
    }

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b"admin:secret"), "YWRtaW46c2VjcmV0");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
    }

    #[test]
    fn the_strongest_digest_is_chosen_over_md5_and_basic() {
        let r = unauthorized(&[
            "Basic realm=\"plug\"",
            "Digest realm=\"r\", nonce=\"n1\", algorithm=MD5, qop=\"auth\"",
            "Digest realm=\"r\", nonce=\"n2\", algorithm=SHA-256, qop=\"auth\"",
        ]);
        match choose(&r, "h").unwrap() {
            Challenge::Digest(p) => assert_eq!(p.nonce, "n2"),
            other => panic!("{other:?}"),
        }
        match choose(&unauthorized(&["Basic realm=\"plug\""]), "h").unwrap() {
            Challenge::Basic { realm } => assert_eq!(realm.as_deref(), Some("plug")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_digest_algorithm_is_named() {
        let r = unauthorized(&["Digest realm=\"r\", nonce=\"n\", algorithm=SHA3-256"]);
        let e = choose(&r, "10.0.0.9").unwrap_err().to_string();
        assert!(e.contains("SHA3-256") && e.contains("10.0.0.9"), "{e}");
    }
}
