//! The machine a bench runs on, shared by the benches that pin their processes: pinning the
//! calling thread to a CPU, and the load average to print beside the figures.

/// Pin the calling thread to `cpu` (a bench's emitter or writer; best effort).
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: CPU_SET writes into the zeroed set it is given; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`), "" where it cannot be read.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
