//! Compiles the kernels' CUDA C as plain C into the emulator (emu/), with a trampoline per
//! kernel that unpacks a `cuLaunchKernel`-style argument array, and writes the kernel table
//! (names and parameter kinds) that the Rust side checks launches against.

use std::fmt::Write as _;
use std::path::PathBuf;

/// The kernel sources, in the order they are concatenated (NVRTC compiles them as one program).
const SOURCES: &[&str] = &["kernels/common.cuh", "kernels/forward.cu", "kernels/backward.cu", "kernels/loss.cu"];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let mut kernels = Vec::new();
    for file in SOURCES {
        println!("cargo:rerun-if-changed={file}");
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        kernels.extend(signatures(&text, file));
    }
    for f in ["emu/emu.h", "emu/emu.c", "kernels/prelude_cuda.h"] {
        println!("cargo:rerun-if-changed={f}");
    }

    // The emulator: emu.h, the kernel sources, and one trampoline per kernel.
    let mut c = String::from("#include \"emu.h\"\n");
    for file in SOURCES {
        let path = std::fs::canonicalize(file).expect("kernel source");
        writeln!(c, "#include \"{}\"", path.display()).unwrap();
    }
    for k in &kernels {
        let args: Vec<String> = k.params.iter().enumerate().map(|(i, (ty, _))| format!("*({ty}*)p[{i}]")).collect();
        writeln!(c, "void trackgnn_emu_tramp_{}(void **p) {{ {}({}); }}", k.name, k.name, args.join(", ")).unwrap();
    }
    let c_path = out.join("emu_kernels.c");
    std::fs::write(&c_path, c).expect("write emu_kernels.c");
    cc::Build::new()
        .file("emu/emu.c")
        .file(&c_path)
        .include("emu")
        .include("kernels")
        .flag("-std=gnu11")
        .flag("-fno-strict-aliasing")
        // The kernels' float arithmetic as written: no contraction into FMAs, no fast math.
        .flag("-ffp-contract=off")
        .warnings(false)
        .opt_level(2)
        .compile("trackgnn_emu");

    // The Rust table: each kernel's name, parameter kinds and trampoline.
    let mut rs = String::new();
    writeln!(rs, "/// Every kernel: its name and the kinds of its parameters, in order.").unwrap();
    writeln!(rs, "pub const KERNELS: &[KernelSignature] = &[").unwrap();
    for k in &kernels {
        let kinds: Vec<String> = k.params.iter().map(|(ty, _)| format!("ParamKind::{}", kind_of(ty))).collect();
        let names: Vec<String> = k.params.iter().map(|(_, n)| format!("{n:?}")).collect();
        writeln!(
            rs,
            "    KernelSignature {{ name: {:?}, kinds: &[{}], names: &[{}] }},",
            k.name,
            kinds.join(", "),
            names.join(", ")
        )
        .unwrap();
    }
    writeln!(rs, "];").unwrap();
    std::fs::write(out.join("kernel_table.rs"), rs).expect("write kernel_table.rs");

    let mut tr = String::from("unsafe extern \"C\" {\n");
    for k in &kernels {
        writeln!(tr, "    fn trackgnn_emu_tramp_{}(p: *mut *mut std::ffi::c_void);", k.name).unwrap();
    }
    tr.push_str("}\n\n/// The emulator's trampoline of each kernel, in the order of `KERNELS`.\n");
    tr.push_str("pub(crate) const TRAMPOLINES: &[unsafe extern \"C\" fn(*mut *mut std::ffi::c_void)] = &[\n");
    for k in &kernels {
        writeln!(tr, "    trackgnn_emu_tramp_{},", k.name).unwrap();
    }
    tr.push_str("];\n");
    std::fs::write(out.join("emu_trampolines.rs"), tr).expect("write emu_trampolines.rs");
}

struct Kernel {
    name: String,
    /// (C type without `__restrict__`, parameter name).
    params: Vec<(String, String)>,
}

/// The `KERNEL void name(params)` declarations of a source file.
fn signatures(text: &str, file: &str) -> Vec<Kernel> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("KERNEL void ") {
        let after = &rest[at + "KERNEL void ".len()..];
        let open = after.find('(').unwrap_or_else(|| panic!("{file}: kernel without parameters"));
        let close = after.find(')').unwrap_or_else(|| panic!("{file}: unclosed parameter list"));
        let name = after[..open].trim().to_string();
        let params = after[open + 1..close]
            .split(',')
            .map(|p| {
                let p = p.replace("__restrict__", " ");
                let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
                let split = p.rfind([' ', '*']).unwrap_or_else(|| panic!("{file}: {name}: `{p}`"));
                (p[..=split].trim().to_string(), p[split + 1..].trim().to_string())
            })
            .collect();
        found.push(Kernel { name, params });
        rest = &after[close..];
    }
    found
}

/// The launch-argument kind of a C parameter type.
fn kind_of(ty: &str) -> &'static str {
    match ty {
        t if t.ends_with('*') => "Ptr",
        "int" => "I32",
        "unsigned" => "U32",
        "float" => "F32",
        t => panic!("kernel parameter type `{t}`: expected a pointer, int, unsigned or float"),
    }
}
