//! The CPU's name and x86 family and model from `/proc/cpuinfo`: for the
//! benchmarks (`benches/shared.rs`) and the diagnostics.

/// The value of `/proc/cpuinfo`'s first line named `key`.
fn cpuinfo_field(cpuinfo: &str, key: &str) -> Option<String> {
    cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
}

/// The CPU's model name from `/proc/cpuinfo`. ARM kernels give only the
/// implementer and part numbers there; the cores this project meets are
/// named from those, others shown by number.
pub fn cpu_model(cpuinfo: &str) -> String {
    let field = |key: &str| cpuinfo_field(cpuinfo, key);
    if let Some(m) = field("model name").or_else(|| field("cpu model")) {
        return m;
    }
    if let (Some(imp), Some(part)) = (field("CPU implementer"), field("CPU part")) {
        let name = match (imp.as_str(), part.as_str()) {
            ("0x41", "0xd0c") => Some("ARM Neoverse-N1"),
            ("0x41", "0xd40") => Some("ARM Neoverse-V1"),
            ("0x41", "0xd49") => Some("ARM Neoverse-N2"),
            ("0x41", "0xd4f") => Some("ARM Neoverse-V2"),
            ("0x41", "0xd84") => Some("ARM Neoverse-V3"),
            ("0x41", "0xd8e") => Some("ARM Neoverse-N3"),
            ("0x41", "0xd08") => Some("ARM Cortex-A72"),
            ("0x41", "0xd0b") => Some("ARM Cortex-A76"),
            ("0xc0", "0xac3") => Some("Ampere AmpereOne"),
            _ => None,
        };
        return match name {
            Some(n) => format!("{n} (implementer {imp}, part {part})"),
            None => format!("CPU implementer {imp}, part {part}"),
        };
    }
    field("Model").unwrap_or_else(|| "unknown".into())
}

/// The x86 CPU's family and model numbers from `/proc/cpuinfo`, `6/167`
/// (empty elsewhere: an ARM core's numbers are in [`cpu_model`] already).
/// Hypervisors often name very different hosts alike ("Intel(R) Xeon(R)
/// Processor", "AMD EPYC"), and runs on two of them must not be merged
/// into one report: `bench_report` names a report by both.
pub fn cpu_id(cpuinfo: &str) -> String {
    let field = |key: &str| cpuinfo_field(cpuinfo, key);
    match (field("cpu family"), field("model")) {
        (Some(family), Some(model)) => format!("{family}/{model}"),
        _ => String::new(),
    }
}
