//! Open files for a run: every stream holds one socket, so `--concurrency 8192` needs more than
//! the 1,024 files a Linux shell gives a process by default (the soft `RLIMIT_NOFILE`). The
//! collector raises its own soft limit up to the hard one before it connects; where the hard
//! limit is below what the run needs it refuses to start, with the numbers and how to raise it,
//! instead of failing streams with "Too many open files" mid-window.

/// Files a run needs besides its streams: stdio, the results file and its temp, the `/metrics`
/// scraper, discovery and prompt requests, NVML, the live page's listener and readers.
pub const SPARE: u64 = 64;

/// A run that needs more open files than this process may have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--concurrency {streams}: the run needs about {need} open files (one per stream, plus {SPARE}) and this process may open {hard} \
     (the hard limit, `ulimit -Hn`); raise it (`ulimit -n {need}` as root, `LimitNOFILE=` in a systemd unit, `nofile` in \
     /etc/security/limits.conf) or lower --concurrency"
)]
pub struct TooFewFiles {
    /// The largest concurrency of the plan.
    pub streams: u64,
    /// Files it needs.
    pub need: u64,
    /// The hard limit.
    pub hard: u64,
}

/// The soft limit to set for a run of `streams` streams, given the current limits: `None` when
/// the soft limit is already enough (it is never lowered).
///
/// # Errors
/// [`TooFewFiles`] when the hard limit is below the need.
pub fn soft_limit_for(streams: u64, soft: u64, hard: u64) -> Result<Option<u64>, TooFewFiles> {
    let need = streams.saturating_add(SPARE);
    if soft >= need {
        return Ok(None);
    }
    if hard < need {
        return Err(TooFewFiles { streams, need, hard });
    }
    // Up to the hard limit (bounded: an "unlimited" hard limit is not a number to set).
    Ok(Some(hard.min(need.saturating_mul(2).max(65_536))))
}

/// Raise this process's soft open-files limit for a run of `streams` streams. Where the limits
/// cannot be read or set, nothing is changed: the streams' own errors then say what failed.
///
/// # Errors
/// [`TooFewFiles`] when the hard limit is below the need.
pub fn ensure(streams: u64) -> Result<(), TooFewFiles> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    // `rlim_t` is u64 on Linux and narrower on some other systems.
    #[allow(clippy::unnecessary_cast)]
    let (soft, hard) = (lim.rlim_cur as u64, lim.rlim_max as u64);
    if let Some(new) = soft_limit_for(streams, soft, hard)? {
        let want = libc::rlimit { rlim_cur: new as libc::rlim_t, rlim_max: lim.rlim_max };
        // SAFETY: setrlimit reads the struct it is given; raising the soft limit up to the hard
        // one needs no privilege.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enough_files_change_nothing() {
        assert_eq!(soft_limit_for(128, 1024, 4096), Ok(None));
        assert_eq!(soft_limit_for(960, 1024, 1024), Ok(None));
    }

    #[test]
    fn the_soft_limit_is_raised_toward_the_hard_one() {
        // A shell's 1,024 / 524,288 (systemd's default) and 8,192 streams.
        assert_eq!(soft_limit_for(8192, 1024, 524_288), Ok(Some(65_536)));
        // A hard limit just above the need: up to it, no further.
        assert_eq!(soft_limit_for(8192, 1024, 9000), Ok(Some(9000)));
        // An "unlimited" hard limit: a bounded number.
        assert_eq!(soft_limit_for(100_000, 1024, u64::MAX), Ok(Some(200_128)));
    }

    #[test]
    fn a_hard_limit_below_the_need_is_refused_with_the_numbers() {
        let e = soft_limit_for(8192, 1024, 4096).unwrap_err();
        assert_eq!(e, TooFewFiles { streams: 8192, need: 8256, hard: 4096 });
        let text = e.to_string();
        assert!(text.starts_with("--concurrency 8192: the run needs about 8256 open files"), "{text}");
        assert!(
            text.contains("may open 4096") && text.contains("ulimit -n 8256") && text.contains("lower --concurrency"),
            "{text}"
        );
    }
}
