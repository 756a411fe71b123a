//! Where the server runs: on this machine or elsewhere, found by the socket, not the URL.
//!
//! A loopback URL says nothing about where the server is: an SSH tunnel, `kubectl
//! port-forward`, `docker-proxy` or any relay puts a remote server on `127.0.0.1`. So the
//! server is found as the process that owns the listening socket of the URL's address and port
//! (Linux: the socket's inode in `/proc/net/tcp{,6}`, then the process whose `/proc/PID/fd`
//! holds it). The owner is then judged:
//!
//! - an inference engine we know (vLLM, SGLang, llama.cpp, the twin, …) → **local**: its process
//!   tree supplies the launch command and the GPUs;
//! - a tunnel or proxy we know (ssh, kubectl, socat, docker-proxy, …) → **remote**;
//! - any other program: a probe connection is opened; a program that opens a connection onward
//!   while serving it is a forwarder (**remote**); otherwise it is the server (**local**).
//!
//! A URL whose host is not an address of this machine is remote; an address of this machine
//! whose socket no visible process owns (another user, another namespace) is **unknown** and
//! treated as remote. The `/proc` parsing is pure and unit-tested; [`locate`] does the I/O.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use crate::measuring::launch::program_name;
use speedmatrix_schema::ServerPlace;

/// One socket of `/proc/net/tcp` or `/proc/net/tcp6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpEntry {
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port (unspecified for a listening socket).
    pub remote: SocketAddr,
    /// The kernel's TCP state: [`LISTEN`], [`ESTABLISHED`], ….
    pub state: u8,
    /// The socket's inode (what `/proc/PID/fd/N` links to as `socket:[INODE]`).
    pub inode: u64,
}

/// TCP state of a listening socket in `/proc/net/tcp`.
pub const LISTEN: u8 = 0x0A;
/// TCP state of a connected socket.
pub const ESTABLISHED: u8 = 0x01;

/// The sockets of one `/proc/net/tcp` (`v6 = false`) or `/proc/net/tcp6` table. Lines that do
/// not parse are skipped.
pub fn parse_tcp_table(text: &str, v6: bool) -> Vec<TcpEntry> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local = parse_addr(f.get(1)?, v6)?;
            let remote = parse_addr(f.get(2)?, v6)?;
            let state = u8::from_str_radix(f.get(3)?, 16).ok()?;
            let inode = f.get(9)?.parse().ok()?;
            Some(TcpEntry { local, remote, state, inode })
        })
        .collect()
}

/// `0100007F:1F40` → 127.0.0.1:8000. The kernel prints each 32-bit word of the address as the
/// native-endian integer of its network-order bytes, and the port in hex.
fn parse_addr(s: &str, v6: bool) -> Option<SocketAddr> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word =
        |i: usize| addr.get(i * 8..i * 8 + 8).and_then(|w| u32::from_str_radix(w, 16).ok()).map(u32::to_ne_bytes);
    let ip = if v6 {
        if addr.len() != 32 {
            return None;
        }
        let mut b = [0u8; 16];
        for i in 0..4 {
            b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
        }
        IpAddr::V6(Ipv6Addr::from(b))
    } else {
        if addr.len() != 8 {
            return None;
        }
        IpAddr::V4(Ipv4Addr::from(word(0)?))
    };
    Some(SocketAddr::new(ip, port))
}

/// The listening socket that takes connections to `target`: one bound to exactly that address
/// first, else one bound to the unspecified address (`0.0.0.0`, `::`; an IPv6 wildcard also
/// takes IPv4 connections unless it is v6-only, which the table does not say).
pub fn listener_for(table: &[TcpEntry], target: SocketAddr) -> Option<TcpEntry> {
    let listening = || table.iter().filter(|e| e.state == LISTEN && e.local.port() == target.port());
    let same = |ip: IpAddr| canonical(ip) == canonical(target.ip());
    listening().find(|e| same(e.local.ip())).or_else(|| listening().find(|e| e.local.ip().is_unspecified())).copied()
}

/// An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) as the IPv4 address it stands for.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Programs that carry connections to a server elsewhere: when one owns the socket, the server
/// is remote. Matched against the program's file name.
const FORWARDERS: [&str; 30] = [
    "ssh",
    "autossh",
    "sshd",
    "sshuttle",
    "kubectl",
    "oc",
    "kubefwd",
    "socat",
    "ncat",
    "nc",
    "netcat",
    "docker-proxy",
    "rootlessport",
    "rootlesskit",
    "slirp4netns",
    "pasta",
    "gvproxy",
    "stunnel",
    "haproxy",
    "nginx",
    "envoy",
    "caddy",
    "traefik",
    "cloudflared",
    "ngrok",
    "frpc",
    "chisel",
    "tailscaled",
    "session-manager-plugin",
    "litellm",
];

/// Whether a program is a tunnel or proxy ([`FORWARDERS`]).
pub fn is_forwarder(argv: &[String]) -> bool {
    let name = program_name(argv);
    FORWARDERS.contains(&name.as_str()) || (name == "gcloud" && argv.iter().any(|a| a == "start-iap-tunnel"))
}

/// What the socket of the URL told.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// A process on this machine serves the URL.
    Local {
        /// The server's top process: the launch command is its argument vector.
        root: u32,
        /// The argument vector of `root`.
        argv: Vec<String>,
        /// `root` and every process below it (workers, engine cores).
        pids: Vec<u32>,
        /// How it was found, for the results file.
        evidence: String,
    },
    /// Not this machine, or a forwarder to another one.
    Remote {
        /// How it was found.
        evidence: String,
    },
    /// This machine's address, but no visible process owns the socket.
    Unknown {
        /// Why.
        evidence: String,
    },
}

impl Found {
    /// The place for the results file.
    pub fn place(&self) -> ServerPlace {
        match self {
            Found::Local { .. } => ServerPlace::Local,
            Found::Remote { .. } => ServerPlace::Remote,
            Found::Unknown { .. } => ServerPlace::Unknown,
        }
    }

    /// How it was found.
    pub fn evidence(&self) -> &str {
        match self {
            Found::Local { evidence, .. } | Found::Remote { evidence } | Found::Unknown { evidence } => evidence,
        }
    }
}

/// Where the server at `url` (the run's parsed `--url`) runs (module docs). Never fails: what
/// cannot be read makes the answer remote or unknown, with the reason in the evidence.
pub fn locate(u: &reqwest::Url) -> Found {
    let url = u.as_str().trim_end_matches('/');
    let (Some(host), Some(port)) = (u.host_str(), u.port_or_known_default()) else {
        return Found::Unknown { evidence: format!("{url} names no host and port") };
    };
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let addrs: Vec<SocketAddr> = (host.as_str(), port).to_socket_addrs().map(Iterator::collect).unwrap_or_default();
    if addrs.is_empty() {
        return Found::Unknown { evidence: format!("{host} does not resolve here") };
    }
    let Some(here) = addrs.iter().copied().find(|a| is_this_machine(a.ip())) else {
        return Found::Remote { evidence: format!("{host} is not an address of this machine") };
    };
    let table = tcp_tables(None);
    let Some(listener) = addrs.iter().filter(|a| is_this_machine(a.ip())).find_map(|a| listener_for(&table, *a)) else {
        return Found::Unknown {
            evidence: format!("no socket listens on {here} in this machine's network namespace (a container's port?)"),
        };
    };
    let owners = socket_owners(&[listener.inode]);
    let Some(owner) = topmost(&owners) else {
        return Found::Unknown {
            evidence: format!(
                "{} listens here, but its process is not visible to this user (run as the server's user or root to record this machine)",
                listener.local
            ),
        };
    };
    judge(owner, listener.local, here)
}

/// Whether `ip` is one of this machine's addresses: loopback, unspecified, or one it can bind.
fn is_this_machine(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Local, or remote by forwarding, once the socket's owner is known.
fn judge(owner: u32, listening: SocketAddr, target: SocketAddr) -> Found {
    let argv = crate::measuring::launch::argv_of(owner).unwrap_or_default();
    let name = program_name(&argv);
    if is_forwarder(&argv) {
        return Found::Remote {
            evidence: format!(
                "{listening} is owned by {name} (PID {owner}), a tunnel or proxy: the server runs elsewhere"
            ),
        };
    }
    let root = crate::measuring::launch::server_root(owner);
    let mut pids = vec![root];
    pids.extend(crate::measuring::launch::descendants(root));
    let me = std::process::id();
    pids.retain(|&p| p != me);
    let known = crate::measuring::launch::is_server(&argv);
    if !known && forwards(&pids, target) {
        return Found::Remote {
            evidence: format!(
                "{listening} is owned by {name} (PID {owner}), which opened a connection onward for our probe: a relay; the server runs elsewhere"
            ),
        };
    }
    let argv = crate::measuring::launch::argv_of(root).unwrap_or(argv);
    let what = match (known, owner == me) {
        (_, true) => ", this process (the twin serves in it)",
        (true, false) => "",
        (false, false) => ", not a known inference server, serving the probe itself",
    };
    Found::Local { root, argv, pids, evidence: format!("{name} (PID {owner}) listens on {listening}{what}") }
}

/// Whether the processes `pids` open a TCP connection onward while a probe connection to
/// `target` is open: the mark of a relay (socat, a Python forwarder) that no name list knows.
/// The probe sends `GET /v1/models` and waits up to 3 s for the first byte of the answer.
fn forwards(pids: &[u32], target: SocketAddr) -> bool {
    let before = outbound(pids);
    let Ok(mut probe) = TcpStream::connect_timeout(&target, Duration::from_secs(3)) else { return false };
    let _ = probe.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = probe.write_all(format!("GET /v1/models HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
    let _ = probe.read(&mut [0u8; 1]);
    let during = outbound(pids);
    during.difference(&before).next().is_some()
}

/// The connections `pids` opened: connected TCP sockets of theirs (by inode) that were not
/// accepted on one of their listening ports and do not lead back to one on this machine (a
/// process talking to itself).
fn outbound(pids: &[u32]) -> HashSet<u64> {
    let inodes = socket_inodes(pids);
    let tables = pids.first().map(|&p| tcp_tables(Some(p))).unwrap_or_default();
    let ours = |e: &&TcpEntry| inodes.contains(&e.inode);
    let listening: HashSet<u16> =
        tables.iter().filter(ours).filter(|e| e.state == LISTEN).map(|e| e.local.port()).collect();
    tables
        .iter()
        .filter(ours)
        .filter(|e| e.state == ESTABLISHED)
        .filter(|e| !listening.contains(&e.local.port()))
        .filter(|e| !(listening.contains(&e.remote.port()) && is_this_machine(e.remote.ip())))
        .map(|e| e.inode)
        .collect()
}

/// Both TCP tables of the network namespace of `pid` (this process's when `None`).
fn tcp_tables(pid: Option<u32>) -> Vec<TcpEntry> {
    let dir = pid.map_or_else(|| "/proc/net".to_string(), |p| format!("/proc/{p}/net"));
    let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).unwrap_or_default();
    let mut all = parse_tcp_table(&read("tcp"), false);
    all.extend(parse_tcp_table(&read("tcp6"), true));
    all
}

/// The socket inodes `socket:[N]` in the `/proc/PID/fd` of each of `pids`.
fn socket_inodes(pids: &[u32]) -> HashSet<u64> {
    pids.iter()
        .filter_map(|p| std::fs::read_dir(format!("/proc/{p}/fd")).ok())
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|l| parse_socket_link(&l.to_string_lossy()))
        .collect()
}

/// `socket:[12345]` → 12345.
pub fn parse_socket_link(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// Every visible process holding one of `inodes` (a listening socket is shared by a server's
/// forked workers).
fn socket_owners(inodes: &[u64]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![] };
    let mut owners: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| socket_inodes(&[pid]).iter().any(|i| inodes.contains(i)))
        .collect();
    owners.sort_unstable();
    owners
}

/// Of processes sharing a socket, the one whose parent is not among them.
fn topmost(owners: &[u32]) -> Option<u32> {
    owners
        .iter()
        .copied()
        .find(|&p| crate::measuring::launch::parent_of(p).is_none_or(|pp| !owners.contains(&pp)))
        .or_else(|| owners.first().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 00000000:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:A0F2 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 20 4 30 10 -1
   garbage line
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5555 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:2328 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 6666 1 0000000000000000 100 0 0 10 0
   2: 00000000000000000000000001000000:2329 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7777 1 0000000000000000 100 0 0 10 0
";

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn tables_parse_addresses_states_and_inodes() {
        let t = parse_tcp_table(TCP, false);
        assert_eq!(t.len(), 3, "the garbage line is skipped");
        assert_eq!(t[0], TcpEntry { local: sa("127.0.0.1:8000"), remote: sa("0.0.0.0:0"), state: LISTEN, inode: 4242 });
        assert_eq!(t[1].local, sa("0.0.0.0:8888"));
        assert_eq!((t[2].remote, t[2].state), (sa("127.0.0.1:41202"), ESTABLISHED));
        let t6 = parse_tcp_table(TCP6, true);
        assert_eq!(t6[0].local, sa("[::]:8080"));
        assert_eq!(t6[1].local, sa("[::ffff:127.0.0.1]:9000"));
        assert_eq!(t6[2].local, sa("[::1]:9001"));
    }

    #[test]
    fn the_listener_is_the_exact_address_first_then_a_wildcard() {
        let mut t = parse_tcp_table(TCP, false);
        t.extend(parse_tcp_table(TCP6, true));
        assert_eq!(listener_for(&t, sa("127.0.0.1:8000")).map(|e| e.inode), Some(4242));
        assert_eq!(listener_for(&t, sa("127.0.0.2:8888")).map(|e| e.inode), Some(777), "0.0.0.0 takes any address");
        assert_eq!(listener_for(&t, sa("127.0.0.1:8080")).map(|e| e.inode), Some(5555), ":: takes IPv4 too");
        assert_eq!(listener_for(&t, sa("127.0.0.1:9000")).map(|e| e.inode), Some(6666), "v4-mapped");
        assert_eq!(listener_for(&t, sa("[::1]:9001")).map(|e| e.inode), Some(7777));
        assert_eq!(listener_for(&t, sa("127.0.0.2:8000")), None, "127.0.0.1:8000 does not take 127.0.0.2");
        assert_eq!(listener_for(&t, sa("127.0.0.1:1234")), None);
    }

    #[test]
    fn forwarders_are_known_by_program_name() {
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert!(is_forwarder(&argv("/usr/bin/ssh -N -L 8000:gpu-box:8000 me@bastion")));
        assert!(is_forwarder(&argv("kubectl port-forward svc/vllm 8000:8000")));
        assert!(is_forwarder(&argv("/usr/bin/docker-proxy -proto tcp -host-ip 0.0.0.0 -host-port 8000")));
        assert!(is_forwarder(&argv("socat TCP-LISTEN:8000,fork TCP:10.0.0.5:8000")));
        assert!(is_forwarder(&argv("python3 -m litellm --port 8000")));
        assert!(is_forwarder(&argv("gcloud compute start-iap-tunnel vm 8000 --local-host-port=localhost:8000")));
        assert!(!is_forwarder(&argv("vllm serve Qwen/Qwen3-8B --port 8000")));
        assert!(!is_forwarder(&argv("python3 -m vllm.entrypoints.openai.api_server")));
        assert_eq!(program_name(&argv("python3 my_server.py --port 1")), "my_server.py");
        assert_eq!(program_name(&argv("/opt/llama-server -m x.gguf")), "llama-server");
    }

    #[test]
    fn socket_links_parse() {
        assert_eq!(parse_socket_link("socket:[12345]"), Some(12345));
        assert_eq!(parse_socket_link("pipe:[12345]"), None);
        assert_eq!(parse_socket_link("/dev/null"), None);
    }

    /// This test process listens on a loopback port: the lookup finds it as the owner.
    #[test]
    fn a_listening_socket_of_this_process_is_found_as_local() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        // Answer the probe like a server would, so the forwarding check has its answer.
        let t = std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        let found = locate(&url(&format!("http://127.0.0.1:{port}")));
        match &found {
            Found::Local { root, evidence, .. } => {
                assert_eq!(*root, std::process::id(), "{evidence}");
                assert!(evidence.contains(&format!("127.0.0.1:{port}")), "{evidence}");
            }
            other => panic!("expected local, got {other:?}"),
        }
        let _ = t.join();
        assert!(matches!(locate(&url("http://10.255.255.1:8000")), Found::Remote { .. }), "not this machine");
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        assert!(matches!(locate(&url(&format!("http://127.0.0.1:{free}"))), Found::Unknown { .. }), "nothing listens");
    }
}
