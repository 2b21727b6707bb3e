//! A loopback port a test hands to a process it starts (`serve --port N`), known before that
//! process binds it.
//!
//! A port taken by binding port 0 and letting go is an ephemeral one: any other test's server
//! binding port 0 in between may be given the same one, and the process then fails with "address
//! in use". Ports are picked below the kernel's ephemeral range instead, where binding port 0 never
//! lands, and each is checked free when picked.

/// The kernel's ephemeral ports start here, or at the value it says.
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A free loopback port no server binding port 0 will be given.
pub(crate) fn free_port() -> u16 {
    let top = ephemeral_start().clamp(12_000, 65_000);
    for _ in 0..500 {
        let port = fastrand::u16(10_000..top);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port below {top}")
}
