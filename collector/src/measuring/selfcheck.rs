//! Client self-check: how much CPU the collector itself used. A client too slow for its server
//! is one of the ways benchmarks mislead: its figures would then be the client's, not the server's.

/// CPU time (user + system) this process has used so far, s; `None` where `getrusage` fails.
pub fn process_cpu_s() -> Option<f64> {
    // SAFETY: getrusage only writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (rc == 0).then(|| {
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(usage.ru_utime) + tv(usage.ru_stime)
    })
}

/// Cores this process may run on (respects `taskset`).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Share of its cores above which the client counts as near saturation.
pub const NEAR_SATURATION: f64 = 0.8;

/// Whether `cpu_pct` (percent of one core) is near saturation for `cores` cores.
pub fn near_saturation(cpu_pct: f64, cores: usize) -> bool {
    cpu_pct > NEAR_SATURATION * 100.0 * cores as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let a = process_cpu_s().unwrap();
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = process_cpu_s().unwrap();
        assert!(b > a, "{a} → {b}");
        assert!(near_saturation(170.0, 2) && !near_saturation(150.0, 2));
    }
}
