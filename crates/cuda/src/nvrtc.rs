//! The kernels compiled by NVRTC to CUBIN for one GPU architecture (a driver refuses PTX from a
//! newer NVRTC; CUBIN for the device's own architecture needs no JIT), cached on disk by source
//! hash and architecture.

use std::ffi::CString;
use std::path::PathBuf;

use cudarc::nvrtc::{result, sys};

use crate::backend::BackendError;
use crate::kernels::{SOURCE, source_hash};

/// NVRTC's options besides the architecture: IEEE division and square root, no fast math, as the
/// CPU engine; contraction into FMAs stays on (the GPU's rounding, within the parity tolerance).
pub const OPTIONS: &[&str] = &["--std=c++17", "--prec-div=true", "--prec-sqrt=true", "--ftz=false"];

/// Whether NVRTC can be loaded (from `LD_LIBRARY_PATH` or the system's library path).
pub fn available() -> bool {
    // SAFETY: only tries to open the library.
    unsafe { sys::is_culib_present() }
}

/// The NVRTC version (major, minor).
pub fn version() -> Result<(i32, i32), BackendError> {
    require()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| BackendError::Device(format!("nvrtcVersion: {e:?}")))?;
    Ok((major, minor))
}

fn require() -> Result<(), BackendError> {
    if available() {
        Ok(())
    } else {
        Err(BackendError::MissingLibrary {
            library: "libnvrtc",
            hint: "install the CUDA 13 runtime compiler (PyPI: `pip install nvidia-cuda-nvrtc==13.0.*`, or a \
                   cluster's CUDA module) and put the folder holding libnvrtc.so.13 on LD_LIBRARY_PATH"
                .into(),
        })
    }
}

/// What one compile gives: the CUBIN and NVRTC's log (empty when it had nothing to say).
pub struct Compiled {
    /// The CUBIN image.
    pub cubin: Vec<u8>,
    /// NVRTC's log: warnings.
    pub log: String,
}

/// Compiles the kernels for `arch` (`sm_90`); a compile error is [`BackendError::Compile`]
/// with NVRTC's log.
pub fn compile(arch: &str) -> Result<Compiled, BackendError> {
    require()?;
    let device = |what: &str, e: result::NvrtcError| BackendError::Device(format!("NVRTC {what}: {e:?}"));
    let src = CString::new(SOURCE).expect("kernel source has no NUL");
    let prog = result::create_program(&src, Some(c"trackgnn_kernels.cu")).map_err(|e| device("create", e))?;
    let mut options: Vec<String> = OPTIONS.iter().map(|s| s.to_string()).collect();
    options.push(format!("--gpu-architecture={arch}"));
    // SAFETY: `prog` was created above and is destroyed once, below.
    let compiled = unsafe { result::compile_program(prog, &options) };
    let log = unsafe { result::get_program_log(prog) }
        .map(|l| {
            let bytes: Vec<u8> = l.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
            String::from_utf8_lossy(&bytes).trim().to_string()
        })
        .unwrap_or_default();
    let out = match compiled {
        Err(_) => Err(BackendError::Compile { arch: arch.to_string(), log }),
        Ok(()) => {
            let mut size = 0usize;
            // SAFETY: a compiled program; the buffer has the size NVRTC reports.
            unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }.result().map_err(|e| device("CUBIN size", e))?;
            let mut cubin = vec![0u8; size];
            unsafe { sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) }.result().map_err(|e| device("CUBIN", e))?;
            Ok(Compiled { cubin, log })
        }
    };
    // SAFETY: created above, not destroyed before.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// Where compiled kernels are kept: `$TRACKGNN_KERNEL_CACHE`, else `$XDG_CACHE_HOME/trackgnn/kernels`,
/// else `~/.cache/trackgnn/kernels`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TRACKGNN_KERNEL_CACHE") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("trackgnn").join("kernels"))
}

/// The kernels for `arch`, from the disk cache when a compile of this source for it is there,
/// else compiled and stored (a cache that cannot be written is skipped).
pub fn cubin_for(arch: &str) -> Result<Vec<u8>, BackendError> {
    let mut opts: Vec<&str> = OPTIONS.to_vec();
    opts.push(arch);
    let name = format!("{:016x}-{arch}.cubin", source_hash(&opts));
    let path = cache_dir().map(|d| d.join(name));
    if let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok()) {
        return Ok(bytes);
    }
    let compiled = compile(arch)?;
    if let Some(p) = path {
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        let stored = p.parent().is_some_and(|d| std::fs::create_dir_all(d).is_ok())
            && std::fs::write(&tmp, &compiled.cubin).is_ok()
            && std::fs::rename(&tmp, &p).is_ok();
        if !stored {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(compiled.cubin)
}
