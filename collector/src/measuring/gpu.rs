//! GPU inventory and telemetry from NVML (the `nvml-wrapper` crate, which loads the driver's
//! `libnvidia-ml.so` at run time, so the binary builds and runs on machines without a GPU).
//!
//! [`open`] finds the GPUs — or says in one line why there are none to read (no NVIDIA driver,
//! `--no-gpu`, a server on another host). [`Sampler`] reads them twice a second on its own
//! thread during the run; [`window_figures`] turns the readings of one decode window into the
//! cell's figures (pure, unit-tested): mean power (W), energy (J), J per output token,
//! utilization, memory, clocks and temperature.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nvml_wrapper::enum_wrappers::device::{Clock as NvmlClock, TemperatureSensor};
use nvml_wrapper::Nvml;
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::{Gpu, GpuFigures, GpuSelection, GpuSelectionMethod};

use crate::measuring::client::Clock;

/// How often the sampler reads the GPUs (NVML's power reading is itself a ~1 s average).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// The GPUs speedmatrix reads: an initialised NVML and the device indices that serve the model.
pub struct Gpus {
    nvml: Nvml,
    indices: Vec<u32>,
    /// How the devices were chosen (for `hardware.gpu_selection`).
    pub selection: GpuSelection,
}

/// Which GPUs serve the model (pure): `devices[i]` is the compute processes NVML lists on GPU
/// `i` (`None` when it cannot list them), `server` the server's process tree, `visible` whether
/// a pid is a process this collector can see.
///
/// - GPUs where a server process holds a compute context → those, `server_processes`;
/// - else, when some GPU runs processes this collector cannot see (another PID namespace: a
///   server in a container) or cannot be listed → all GPUs, `all_assumed`;
/// - else (no compute process at all, or only other visible processes': the twin, a CPU
///   server) → none, `none`: the server is not on this host's GPUs.
///
/// Returns the chosen indices and the selection.
pub fn choose(devices: &[Option<Vec<u32>>], server: &[u32], visible: &dyn Fn(u32) -> bool) -> (Vec<u32>, GpuSelection) {
    let count = devices.len();
    let indices = |keep: &dyn Fn(&Option<Vec<u32>>) -> bool| -> Vec<u32> {
        devices.iter().enumerate().filter(|(_, d)| keep(d)).map(|(i, _)| i as u32).collect()
    };
    let used = indices(&|d| d.as_ref().is_some_and(|p| p.iter().any(|pid| server.contains(pid))));
    if !used.is_empty() {
        let mut pids: Vec<u32> = devices.iter().flatten().flatten().copied().filter(|p| server.contains(p)).collect();
        pids.sort_unstable();
        pids.dedup();
        let detail = format!(
            "{} of {count} GPU(s): those where the server's processes (PID {}) hold a compute context",
            used.len(),
            pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        );
        return (used, GpuSelection { method: GpuSelectionMethod::ServerProcesses, detail });
    }
    let unlisted = devices.iter().filter(|d| d.is_none()).count();
    let unseen: Vec<u32> = devices.iter().flatten().flatten().copied().filter(|p| !visible(*p)).collect();
    if unlisted > 0 || !unseen.is_empty() {
        let why = if unseen.is_empty() {
            format!("NVML could not list the processes of {unlisted} GPU(s)")
        } else {
            "they run processes this collector cannot see (another PID namespace, e.g. a container)".to_string()
        };
        let detail = format!(
            "all {count} GPU(s) of the host: the server's processes were not found on any, and {why}; power and energy may include other work"
        );
        return (indices(&|_| true), GpuSelection { method: GpuSelectionMethod::AllAssumed, detail });
    }
    let others = devices.iter().flatten().flatten().count();
    let detail = if others == 0 {
        format!(
            "none of the host's {count} GPU(s): no process computes on them, so the server is not on this host's GPUs"
        )
    } else {
        format!("none of the host's {count} GPU(s): only other processes compute on them, so the server is not on this host's GPUs")
    };
    (vec![], GpuSelection { method: GpuSelectionMethod::None, detail })
}

/// Why there are no GPUs to read. Its text is one line for `hardware.gpu_telemetry_note`: the
/// run goes on without GPU figures.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// NVML could not be loaded or initialised.
    #[error("NVML not available: {0} (no NVIDIA driver on this host)")]
    Unavailable(String),
    /// NVML loaded but could not count the GPUs.
    #[error("NVML: cannot count GPUs: {0}")]
    Count(nvml_wrapper::error::NvmlError),
    /// NVML sees no GPU.
    #[error("NVML found no GPU on this host")]
    NoGpu,
    /// The server is not on this host's GPUs ([`choose`] says why).
    #[error("{}", .0.detail)]
    NotOnGpus(GpuSelection),
}

impl GpuError {
    /// The selection this leaves: none, with the reason.
    pub fn selection(&self) -> GpuSelection {
        match self {
            GpuError::NotOnGpus(s) => s.clone(),
            other => GpuSelection { method: GpuSelectionMethod::None, detail: other.to_string() },
        }
    }
}

/// Open NVML (`libnvidia-ml.so`, then `libnvidia-ml.so.1` for hosts with only the driver's
/// runtime library) and choose the server's GPUs ([`choose`]).
///
/// # Errors
/// [`GpuError`]: why GPU figures will be missing, e.g. "NVML not available: libnvidia-ml.so not
/// found (no NVIDIA driver on this host)", or that the server's processes hold no GPU.
pub fn open(server_pids: &[u32]) -> Result<Gpus, GpuError> {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(first) => Nvml::builder()
            .lib_path(std::ffi::OsStr::new("libnvidia-ml.so.1"))
            .init()
            .map_err(|_| GpuError::Unavailable(nvml_error_text(&first)))?,
    };
    let count = nvml.device_count().map_err(GpuError::Count)?;
    if count == 0 {
        return Err(GpuError::NoGpu);
    }
    let devices: Vec<Option<Vec<u32>>> = (0..count)
        .map(|i| {
            nvml.device_by_index(i)
                .and_then(|d| d.running_compute_processes())
                .ok()
                .map(|procs| procs.iter().map(|p| p.pid).collect())
        })
        .collect();
    let visible = |pid: u32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    let (indices, selection) = choose(&devices, server_pids, &visible);
    if indices.is_empty() {
        return Err(GpuError::NotOnGpus(selection));
    }
    Ok(Gpus { nvml, indices, selection })
}

fn nvml_error_text(e: &nvml_wrapper::error::NvmlError) -> String {
    match e {
        nvml_wrapper::error::NvmlError::LibloadingError(_) => "libnvidia-ml.so not found".into(),
        other => other.to_string(),
    }
}

impl Gpus {
    /// One entry per GPU read: name, UUID, memory (bytes), driver, CUDA version, power limit (W).
    /// Fields NVML cannot give stay `None`.
    pub fn inventory(&self) -> Vec<Gpu> {
        let driver = self.nvml.sys_driver_version().ok();
        let cuda = self.nvml.sys_cuda_driver_version().ok().map(|v| {
            format!("{}.{}", nvml_wrapper::cuda_driver_version_major(v), nvml_wrapper::cuda_driver_version_minor(v))
        });
        self.indices
            .iter()
            .filter_map(|&i| self.nvml.device_by_index(i).ok())
            .map(|d| Gpu {
                name: d.name().unwrap_or_else(|_| "unknown NVIDIA GPU".into()),
                uuid: d.uuid().ok(),
                memory_bytes: d.memory_info().ok().map(|m| m.total),
                driver: driver.clone(),
                cuda: cuda.clone(),
                power_limit_w: d.enforced_power_limit().ok().map(|mw| f64::from(mw) / 1000.0),
            })
            .collect()
    }

    /// One reading of every GPU, summed (power, energy, memory), averaged (utilization,
    /// clocks) or the largest (temperature) over the GPUs.
    pub fn read(&self) -> Reading {
        let devices: Vec<_> = self.indices.iter().filter_map(|&i| self.nvml.device_by_index(i).ok()).collect();
        let all = |v: Vec<Option<f64>>| -> Option<Vec<f64>> { v.into_iter().collect() };
        let mean = |v: Option<Vec<f64>>| v.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64);
        let sum = |v: Option<Vec<f64>>| v.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>());
        let each = |f: &dyn Fn(&nvml_wrapper::Device) -> Option<f64>| all(devices.iter().map(f).collect());
        Reading {
            power_w: sum(each(&|d| d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0))),
            energy_j: sum(each(&|d| d.total_energy_consumption().ok().map(|mj| mj as f64 / 1000.0))),
            utilization_pct: mean(each(&|d| d.utilization_rates().ok().map(|u| f64::from(u.gpu)))),
            memory_used_bytes: sum(each(&|d| d.memory_info().ok().map(|m| m.used as f64))).map(|b| b as u64),
            sm_clock_mhz: mean(each(&|d| d.clock_info(NvmlClock::SM).ok().map(f64::from))),
            mem_clock_mhz: mean(each(&|d| d.clock_info(NvmlClock::Memory).ok().map(f64::from))),
            temperature_c: each(&|d| d.temperature(TemperatureSensor::Gpu).ok().map(f64::from))
                .and_then(|v| v.into_iter().reduce(f64::max)),
        }
    }
}

/// One NVML reading over the GPUs read. Source: NVML.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reading {
    /// Board power, summed over GPUs, W.
    pub power_w: Option<f64>,
    /// Energy counter (since the driver loaded), summed over GPUs, J. Volta and newer.
    pub energy_j: Option<f64>,
    /// GPU utilization, mean over GPUs, percent 0–100.
    pub utilization_pct: Option<f64>,
    /// Memory used, summed over GPUs, bytes.
    pub memory_used_bytes: Option<u64>,
    /// SM clock, mean over GPUs, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// Memory clock, mean over GPUs, MHz.
    pub mem_clock_mhz: Option<f64>,
    /// GPU temperature, the hottest GPU, °C.
    pub temperature_c: Option<f64>,
}

/// Reads the GPUs every [`SAMPLE_EVERY`] on its own thread (NVML calls block) and keeps the
/// readings with their time on the run's clock (ms). Stops when dropped.
pub struct Sampler {
    readings: Arc<Mutex<Vec<(f64, Reading)>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Sampler {
    /// Start reading `gpus` now.
    pub fn start(gpus: Gpus, clock: Clock) -> Sampler {
        let readings = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (r, s) = (readings.clone(), stop.clone());
        // Without a thread there are simply no readings (and no GPU figures in the cells).
        let _ = std::thread::Builder::new().name("nvml-sampler".into()).spawn(move || {
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                let reading = gpus.read();
                if let Ok(mut v) = r.lock() {
                    v.push((clock.now_ms(), reading));
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        Sampler { readings, stop }
    }

    /// The readings taken since the last call (and forget them), in time order.
    pub fn take(&self) -> Vec<(f64, Reading)> {
        self.readings.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The GPU figures of one decode window from `[w0, w1]` (ms, run clock) and the readings taken
/// around it: energy from the energy counter's rate between the first and last reading inside
/// the window, scaled to the window's length (else mean power × window); mean power = energy ÷
/// window; J per output token = energy ÷ `output_tokens`. Returns `None` with fewer than one
/// reading inside the window.
///
/// Shape: `(figures, mean power W, J per output token)`.
pub fn window_figures(
    readings: &[(f64, Reading)],
    w0: f64,
    w1: f64,
    output_tokens: Option<u64>,
) -> Option<(GpuFigures, Option<f64>, Option<f64>)> {
    let inside: Vec<&(f64, Reading)> = readings.iter().filter(|(t, _)| *t >= w0 && *t <= w1).collect();
    if inside.is_empty() || w1 <= w0 {
        return None;
    }
    let window_s = (w1 - w0) / 1000.0;
    let mean = |get: &dyn Fn(&Reading) -> Option<f64>| {
        let v: Vec<f64> = inside.iter().filter_map(|(_, r)| get(r)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let max = |get: &dyn Fn(&Reading) -> Option<f64>| inside.iter().filter_map(|(_, r)| get(r)).reduce(f64::max);
    let counter = inside.iter().filter_map(|(t, r)| r.energy_j.map(|e| (*t, e))).collect::<Vec<_>>();
    let energy_j = match (counter.first(), counter.last()) {
        (Some(&(t0, e0)), Some(&(t1, e1))) if t1 - t0 >= 200.0 && e1 >= e0 => {
            Some((e1 - e0) / ((t1 - t0) / 1000.0) * window_s)
        }
        _ => mean(&|r| r.power_w).map(|w| w * window_s),
    };
    let power_w = energy_j.map(|e| e / window_s);
    let per_token = match (energy_j, output_tokens) {
        (Some(e), Some(n)) if n > 0 => Some(round3(e / n as f64)),
        _ => None,
    };
    let figures = GpuFigures {
        power_w: power_w.map(round3),
        energy_j: energy_j.map(round3),
        utilization_pct: mean(&|r| r.utilization_pct).map(round3),
        memory_used_bytes: max(&|r| r.memory_used_bytes.map(|b| b as f64)).map(|b| b as u64),
        sm_clock_mhz: mean(&|r| r.sm_clock_mhz).map(round3),
        mem_clock_mhz: mean(&|r| r.mem_clock_mhz).map(round3),
        temperature_c: max(&|r| r.temperature_c),
    };
    Some((figures, power_w.map(round3), per_token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(power: f64, energy: f64) -> Reading {
        Reading {
            power_w: Some(power),
            energy_j: Some(energy),
            utilization_pct: Some(90.0),
            memory_used_bytes: Some(100),
            sm_clock_mhz: Some(1980.0),
            mem_clock_mhz: Some(2619.0),
            temperature_c: Some(61.0),
        }
    }

    #[test]
    fn energy_comes_from_the_counter_scaled_to_the_window() {
        // 600 W for 10 s, read every 500 ms from t = 1,000 ms; window 1,200 … 11,200 ms.
        let readings: Vec<(f64, Reading)> =
            (0..24).map(|i| (1000.0 + 500.0 * i as f64, reading(590.0, 50_000.0 + 300.0 * i as f64))).collect();
        let (f, power, per_token) = window_figures(&readings, 1200.0, 11_200.0, Some(12_000)).unwrap();
        assert_eq!(f.energy_j, Some(6000.0));
        assert_eq!(power, Some(600.0), "power = energy ÷ window, from the counter, not the 590 W readings");
        assert_eq!(per_token, Some(0.5));
        assert_eq!(f.utilization_pct, Some(90.0));
        assert_eq!(f.temperature_c, Some(61.0));
    }

    #[test]
    fn without_an_energy_counter_mean_power_times_window() {
        let readings: Vec<(f64, Reading)> = (0..5)
            .map(|i| (500.0 * i as f64, Reading { power_w: Some(100.0 + 50.0 * i as f64), ..Reading::default() }))
            .collect();
        let (f, power, per_token) = window_figures(&readings, 0.0, 2000.0, Some(0)).unwrap();
        assert_eq!(power, Some(200.0));
        assert_eq!(f.energy_j, Some(400.0));
        assert_eq!(per_token, None, "no tokens, no J/token");
        assert_eq!(f.utilization_pct, None);
    }

    #[test]
    fn no_reading_inside_the_window_gives_nothing() {
        let readings = vec![(0.0, reading(1.0, 1.0)), (5000.0, reading(1.0, 2.0))];
        assert!(window_figures(&readings, 1000.0, 4000.0, Some(10)).is_none());
        assert!(window_figures(&[], 0.0, 1000.0, Some(10)).is_none());
    }

    /// On a host without an NVIDIA driver (CI) `open` says why in one line instead of failing;
    /// with one, the test process (no GPU context) is on none of its GPUs unless it cannot see
    /// their processes.
    #[test]
    fn nvml_absent_is_a_note_not_a_failure() {
        let has_driver =
            ["/proc/driver/nvidia/version", "/dev/nvidiactl"].iter().any(|p| std::path::Path::new(p).exists());
        match open(&[std::process::id()]) {
            Ok(g) => assert!(
                has_driver && g.selection.method == GpuSelectionMethod::AllAssumed,
                "this test holds no GPU: {:?}",
                g.selection
            ),
            Err(e) => {
                let s = e.selection();
                assert_eq!(s.method, GpuSelectionMethod::None);
                if !has_driver {
                    assert!(s.detail.starts_with("NVML"), "{}", s.detail);
                }
                assert!(!s.detail.contains('\n'));
            }
        }
    }

    /// Inventories of three GPUs: `server` is the server's process tree (4242 and its worker
    /// 4300), 99 another visible process, 7 a process in another PID namespace.
    #[test]
    fn gpus_are_chosen_by_the_server_processes_and_never_guessed_silently() {
        let server = [4242, 4300];
        let visible = |p: u32| p != 7;
        let pick = |devices: &[Option<Vec<u32>>]| choose(devices, &server, &visible);

        // Tensor parallel on GPUs 1 and 2, another job on GPU 0.
        let (idx, s) = pick(&[Some(vec![99]), Some(vec![4300]), Some(vec![4300, 4242])]);
        assert_eq!((idx, s.method), (vec![1, 2], GpuSelectionMethod::ServerProcesses));
        assert_eq!(
            s.detail,
            "2 of 3 GPU(s): those where the server's processes (PID 4242, 4300) hold a compute context"
        );

        // The server in a container: NVML lists pids this collector cannot see → all, assumed.
        let (idx, s) = pick(&[Some(vec![7]), Some(vec![]), Some(vec![])]);
        assert_eq!((idx, s.method), (vec![0, 1, 2], GpuSelectionMethod::AllAssumed));
        assert!(
            s.detail.contains("another PID namespace") && s.detail.contains("may include other work"),
            "{}",
            s.detail
        );

        // A GPU whose processes NVML cannot list: assumed too, and said why.
        let (_, s) = pick(&[None, Some(vec![])]);
        assert_eq!(s.method, GpuSelectionMethod::AllAssumed);
        assert!(s.detail.contains("could not list"), "{}", s.detail);

        // The twin or a CPU server: nothing computes on the GPUs, or only other visible jobs.
        let (idx, s) = pick(&[Some(vec![]), Some(vec![])]);
        assert_eq!((idx.len(), s.method), (0, GpuSelectionMethod::None));
        assert!(s.detail.contains("not on this host's GPUs"), "{}", s.detail);
        let (idx, s) = pick(&[Some(vec![99]), Some(vec![])]);
        assert_eq!((idx.len(), s.method), (0, GpuSelectionMethod::None));
        assert!(s.detail.contains("only other processes"), "{}", s.detail);
        assert_eq!(choose(&[], &server, &visible).1.method, GpuSelectionMethod::None, "a host without GPUs");
    }
}
