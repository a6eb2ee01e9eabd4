//! Every kernel compiles with NVRTC for the A100's and the H100's architectures, without a
//! warning. NVRTC needs no GPU and no driver: CI installs it from PyPI (`.ci/run`) and sets
//! `TRACKGNN_REQUIRE_NVRTC=1`, so that there a missing NVRTC fails instead of skipping.
#![cfg(feature = "cuda")]

use trackgnn_cuda::kernels::KERNELS;
use trackgnn_cuda::nvrtc;

#[test]
fn every_kernel_compiles_for_sm80_and_sm90_without_warnings() {
    if !nvrtc::available() {
        assert!(
            std::env::var_os("TRACKGNN_REQUIRE_NVRTC").is_none(),
            "TRACKGNN_REQUIRE_NVRTC is set but libnvrtc.so.13 is not on LD_LIBRARY_PATH"
        );
        eprintln!("skipped: NVRTC not found (pip install nvidia-cuda-nvrtc==13.0.*; see docs/gpu.md)");
        return;
    }
    let (major, minor) = nvrtc::version().unwrap();
    assert_eq!(major, 13, "NVRTC {major}.{minor}: the kernels are built for CUDA 13");
    for arch in ["sm_80", "sm_90"] {
        let compiled = nvrtc::compile(arch).unwrap_or_else(|e| panic!("{e}"));
        assert!(compiled.log.is_empty(), "NVRTC warned for {arch}:\n{}", compiled.log);
        assert_eq!(&compiled.cubin[..4], b"\x7fELF", "{arch}: not a CUBIN");
        for k in KERNELS {
            let name = k.name.as_bytes();
            assert!(compiled.cubin.windows(name.len()).any(|w| w == name), "{arch}: kernel {} missing", k.name);
        }
    }
}

#[test]
fn a_source_error_is_reported_with_nvrtcs_log() {
    if !nvrtc::available() {
        return;
    }
    let e = nvrtc::compile("sm_1").err().expect("an invalid architecture fails");
    assert!(e.to_string().contains("sm_1"), "{e}");
}
