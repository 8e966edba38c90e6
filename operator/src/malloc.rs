//! glibc's allocator, set for a small long-running process. Over a third of the operator's
//! anonymous memory at its peak was not live heap but what glibc's malloc kept around it
//! (heaptrack, 1,000 Agents: 9.4 MiB of live heap at the peak, 21–22 MiB anonymous RSS).
//! glibc gives every thread that allocates its own arena — here the main thread, which
//! polls the controllers and watches, and the two runtime workers, which run the HTTP/2
//! connection — and an arena only reuses what was freed into it: response buffers filled on
//! a worker and the objects parsed from them on the main thread grow separate heaps, each
//! with its own free space. One arena for the whole process took the benchmark's peak from
//! 32.9 to about 24 MiB with no measurable cost in CPU (the operator's threads are mostly
//! idle and rarely contend for the arena's lock). Fixed mmap and trim thresholds (128 KiB)
//! were measured too and did not lower the peak, so they are not set.
//!
//! glibc reads its tunables only from the environment at process start, and `mallopt`
//! would need `unsafe` FFI, which the workspace forbids. So `run` re-executes itself once
//! with `GLIBC_TUNABLES` set (same PID, same arguments), unless the variable is set
//! already: set it yourself to choose other settings (an empty value keeps glibc's
//! defaults). Other C libraries are left alone.

/// The environment variable glibc reads its tunables from.
pub const ENV: &str = "GLIBC_TUNABLES";

/// The tunables `run` starts with unless [`ENV`] is set.
pub const TUNABLES: &str = "glibc.malloc.arena_max=1";

/// Unless [`ENV`] is set, replaces this process by the same program with the same
/// arguments and [`TUNABLES`] set. Returns when it does not: the variable was set (by the
/// user, or by this very re-execution), the C library is not glibc, or the exec failed
/// (a warning on stderr; the operator then runs with glibc's defaults).
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;

        if std::env::var_os(ENV).is_some() {
            return;
        }
        let mut args = std::env::args_os();
        let arg0 = args.next().unwrap_or_default();
        // /proc/self/exe, not the path in argv[0]: it is the running binary even when the
        // file was replaced or the process was started through $PATH.
        let err = std::process::Command::new("/proc/self/exe").arg0(arg0).args(args).env(ENV, TUNABLES).exec();
        eprintln!(
            "warning: cannot re-execute with {ENV}={TUNABLES} ({err}); running with glibc's default malloc settings"
        );
    }
}
