//! Which device runs a model: the request (`--device auto|cpu|cuda`), what the machine has, and
//! the choice with the reason for it, so that the front ends can say why.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use cudarc::driver::CudaContext;
use serde::{Deserialize, Serialize};

use super::CudaError;

/// GPUs older than Ampere (compute capability 8.0) lack the int8 and f16 mma shapes the kernels use.
pub const MIN_COMPUTE: (i32, i32) = (8, 0);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum DeviceRequest {
    /// A capable GPU with enough free memory, else the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

impl DeviceRequest {
    pub const ALL: [DeviceRequest; 3] = [DeviceRequest::Auto, DeviceRequest::Cpu, DeviceRequest::Cuda];

    pub fn name(self) -> &'static str {
        match self {
            DeviceRequest::Auto => "auto",
            DeviceRequest::Cpu => "cpu",
            DeviceRequest::Cuda => "cuda",
        }
    }
}

impl FromStr for DeviceRequest {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DeviceRequest::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("unknown device '{s}': use auto, cpu or cuda"))
    }
}

impl fmt::Display for DeviceRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One NVIDIA GPU as the driver reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute: (i32, i32),
    pub free_bytes: u64,
    pub total_bytes: u64,
}

impl GpuInfo {
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute.0, self.compute.1)
    }
}

/// What the machine offers for CUDA.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// No driver library (libcuda) could be loaded: no NVIDIA driver is installed.
    NoDriver,
    /// The driver is there but failed or reports no device.
    NoDevice(String),
    Gpus(Vec<GpuInfo>),
}

/// Asks the driver once per process (creating a context costs a few hundred milliseconds).
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| {
        // cudarc panics instead of erring when the library is missing, so look first.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Probe::NoDriver;
        }
        let count = match CudaContext::device_count() {
            Ok(n) if n > 0 => n as usize,
            Ok(_) => return Probe::NoDevice("the NVIDIA driver reports no GPU".into()),
            Err(e) => return Probe::NoDevice(format!("the NVIDIA driver failed: {e}")),
        };
        let mut gpus = Vec::new();
        for ordinal in 0..count {
            let info = CudaContext::new(ordinal).and_then(|ctx| {
                let (free, total) = ctx.mem_get_info()?;
                Ok(GpuInfo {
                    ordinal,
                    name: ctx.name()?,
                    compute: ctx.compute_capability()?,
                    free_bytes: free as u64,
                    total_bytes: total as u64,
                })
            });
            match info {
                Ok(g) => gpus.push(g),
                Err(e) => return Probe::NoDevice(format!("GPU {ordinal} could not be opened: {e}")),
            }
        }
        Probe::Gpus(gpus)
    })
}

/// Where a model runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Device {
    Cpu,
    Cuda(GpuInfo),
}

/// The device chosen and, in words, why.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub device: Device,
    pub reason: String,
}

impl Probe {
    /// One line on what the machine offers, for an About box: the GPUs, or why there are none.
    pub fn describe(&self) -> String {
        match self {
            Probe::NoDriver => "none: no NVIDIA driver found (libcuda could not be loaded)".into(),
            Probe::NoDevice(why) => format!("none: {why}"),
            Probe::Gpus(gpus) => gpus
                .iter()
                .map(|g| format!("{} ({}, {} free of {})", g.name, g.arch(), gib(g.free_bytes), gib(g.total_bytes)))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Picks the device for a model that needs `needed_bytes` of GPU memory.
pub fn choose(request: DeviceRequest, needed_bytes: u64, probe: &Probe) -> Result<Choice, CudaError> {
    if request == DeviceRequest::Cpu {
        return Ok(Choice { device: Device::Cpu, reason: "CPU, as requested".into() });
    }
    let gpu = match probe {
        Probe::NoDriver => Err(CudaError::NoDriver),
        Probe::NoDevice(why) => Err(CudaError::NoDevice(why.clone())),
        Probe::Gpus(gpus) => {
            let capable: Vec<&GpuInfo> = gpus.iter().filter(|g| g.compute >= MIN_COMPUTE).collect();
            match capable.iter().max_by_key(|g| g.free_bytes) {
                None => Err(CudaError::TooOld(gpus.iter().map(|g| format!("{} ({})", g.name, g.arch())).collect())),
                Some(g) if g.free_bytes < needed_bytes => Err(CudaError::NotEnoughMemory {
                    gpu: g.name.clone(),
                    needed: gib(needed_bytes),
                    free: gib(g.free_bytes),
                }),
                Some(g) => Ok((*g).clone()),
            }
        }
    };
    match (gpu, request) {
        (Ok(g), _) => Ok(Choice { reason: Probe::Gpus(vec![g.clone()]).describe(), device: Device::Cuda(g) }),
        (Err(e), DeviceRequest::Auto) => Ok(Choice { device: Device::Cpu, reason: format!("CPU: {e}") }),
        (Err(e), _) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(name: &str, compute: (i32, i32), free_gib: u64) -> GpuInfo {
        GpuInfo { ordinal: 0, name: name.into(), compute, free_bytes: free_gib << 30, total_bytes: 80 << 30 }
    }

    #[test]
    fn auto_falls_back_to_the_cpu_and_says_why() {
        let c = choose(DeviceRequest::Auto, 5 << 30, &Probe::NoDriver).unwrap();
        assert_eq!(c.device, Device::Cpu);
        assert!(c.reason.contains("no NVIDIA driver"), "{}", c.reason);
        let c = choose(DeviceRequest::Auto, 5 << 30, &Probe::Gpus(vec![gpu("T4", (7, 5), 15)])).unwrap();
        assert_eq!(c.device, Device::Cpu);
        assert!(c.reason.contains("T4 (sm_75)"), "{}", c.reason);
        let c = choose(DeviceRequest::Auto, 20 << 30, &Probe::Gpus(vec![gpu("L4", (8, 9), 10)])).unwrap();
        assert!(c.reason.contains("needs 20.0 GiB") && c.reason.contains("10.0 GiB free"), "{}", c.reason);
    }

    #[test]
    fn auto_takes_a_capable_gpu_with_room() {
        let gpus = Probe::Gpus(vec![gpu("T4", (7, 5), 15), gpu("H200", (9, 0), 130)]);
        let c = choose(DeviceRequest::Auto, 5 << 30, &gpus).unwrap();
        assert!(matches!(&c.device, Device::Cuda(g) if g.name == "H200"));
        assert!(c.reason.contains("sm_90"));
    }

    #[test]
    fn cuda_requested_without_one_is_an_error_and_cpu_is_always_honoured() {
        let e = choose(DeviceRequest::Cuda, 1, &Probe::NoDriver).unwrap_err();
        assert!(e.to_string().contains("--device cpu"), "{e}");
        let e = choose(DeviceRequest::Cuda, 50 << 30, &Probe::Gpus(vec![gpu("A100", (8, 0), 40)])).unwrap_err();
        assert!(e.to_string().contains("needs 50.0 GiB"), "{e}");
        let gpus = Probe::Gpus(vec![gpu("H200", (9, 0), 130)]);
        assert_eq!(choose(DeviceRequest::Cpu, 1, &gpus).unwrap().device, Device::Cpu);
        assert_eq!("cuda".parse::<DeviceRequest>().unwrap(), DeviceRequest::Cuda);
        assert!("gpu".parse::<DeviceRequest>().is_err());
    }
}
