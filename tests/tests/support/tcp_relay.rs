//! `tcp-relay LISTEN UPSTREAM`: a plain TCP forwarder for the end-to-end tests, standing in for
//! an SSH tunnel, `kubectl port-forward` or socat in front of a server. It listens on `LISTEN`
//! (e.g. `127.0.0.1:0`), prints `listening on ADDR` once bound, and for every connection it
//! accepts opens one to `UPSTREAM` and copies bytes both ways until either side closes.

use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};

fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(listen), Some(upstream)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: tcp-relay LISTEN_ADDR UPSTREAM_ADDR");
        std::process::exit(2);
    };
    let listener = TcpListener::bind(listen).unwrap_or_else(|e| {
        eprintln!("tcp-relay: cannot listen on {listen}: {e}");
        std::process::exit(1);
    });
    let addr = listener.local_addr().expect("a bound address");
    println!("listening on {addr}");
    let _ = std::io::stdout().flush();
    for client in listener.incoming().flatten() {
        let upstream = upstream.clone();
        std::thread::spawn(move || {
            let Ok(server) = TcpStream::connect(&upstream) else { return };
            let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { return };
            std::thread::spawn(move || pump(c2, server));
            pump(s2, client);
        });
    }
}
