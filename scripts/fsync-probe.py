#!/usr/bin/env python3
"""fdatasync floor of a file system: N threads, each appending 4 KiB + fdatasync to its own file for 3 s.
Usage: scripts/fsync-probe.py THREADS [DIR]. Compare with the witness p99 in docs/performance.md."""
import os, threading, time, tempfile, sys
n=int(sys.argv[1]); d=tempfile.mkdtemp(dir=sys.argv[2] if len(sys.argv) > 2 else None); lat=[]; stop=time.time()+3
def w(i):
    fd=os.open(f"{d}/f{i}",os.O_WRONLY|os.O_CREAT|os.O_APPEND)
    b=b"x"*4096
    while time.time()<stop:
        t=time.perf_counter(); os.write(fd,b); os.fdatasync(fd); lat.append(time.perf_counter()-t)
ts=[threading.Thread(target=w,args=(i,)) for i in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
lat.sort(); print(n,"threads: fdatasync+append p50 %.2f ms p99 %.2f ms, %d/s"%(lat[len(lat)//2]*1e3, lat[int(len(lat)*.99)]*1e3, len(lat)/3))
