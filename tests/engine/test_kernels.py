"""Kernel families: what a host and a build offer, and what a copy says of its choice (pure)."""

from __future__ import annotations

import pytest

from pier.engine.kernels import HostKernels, KernelFamily, Probed, chosen, notice, parse_cpuinfo, parse_system_info

SAPPHIRE_RAPIDS_BUILD = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | "
                         "BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | "
                         "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")
ZEN4_BUILD = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
              "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")
GRAVITON_BUILD = ("CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | MATMUL_INT8 = 1 | SVE = 1 | DOTPROD = 1 | "
                  "SVE_CNT = 16 | REPACK = 1 | ")
CUDA_BUILD = "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | CPU : AVX2 = 1 | REPACK = 1 | "
SPR_FLAGS = frozenset({"avx2", "avx512f", "avx512_vnni", "amx_tile", "amx_int8", "amx_bf16"})


def test_the_cpu_part_of_the_system_info_line() -> None:
    assert parse_system_info(ZEN4_BUILD)["AVX512"] == "1"
    assert "AMX_INT8" not in parse_system_info(ZEN4_BUILD)
    assert parse_system_info(GRAVITON_BUILD)["SVE_CNT"] == "16"
    assert parse_system_info(CUDA_BUILD) == {"AVX2": "1", "REPACK": "1"}  # not the CUDA backend's features
    assert parse_system_info("") == {}


def test_cpuinfo_flags_on_x86_and_features_on_arm() -> None:
    x86 = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8488C\nflags\t\t: fpu avx2 amx_int8\n"
    assert parse_cpuinfo(x86) == ("Intel(R) Xeon(R) Platinum 8488C", frozenset({"fpu", "avx2", "amx_int8"}))
    arm = "processor\t: 0\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\n"
    assert parse_cpuinfo(arm) == ("", frozenset({"fp", "asimd", "sve"}))


@pytest.mark.parametrize(("machine", "flags", "build", "families", "repack_name"), [
    ("x86_64", SPR_FLAGS, SAPPHIRE_RAPIDS_BUILD, ["amx", "repack", "plain"], "AVX-512 repack kernels"),
    # the build has AMX but this CPU does not (a wheel built elsewhere): AMX is not a candidate
    ("x86_64", frozenset({"avx2", "avx512f"}), SAPPHIRE_RAPIDS_BUILD, ["repack", "plain"], "AVX-512 repack kernels"),
    # an AMX CPU with a build made without AMX (GGML_NATIVE=OFF and AVX-512 flags)
    ("x86_64", SPR_FLAGS, ZEN4_BUILD, ["repack", "plain"], "AVX-512 repack kernels"),
    ("aarch64", frozenset({"asimd", "sve"}), GRAVITON_BUILD, ["repack", "plain"], "SVE repack kernels"),
    ("x86_64", frozenset({"avx2"}), "CPU : AVX2 = 1 | ", ["plain"], "AVX2 repack kernels"),
])
def test_the_families_a_host_offers_fastest_first(
    machine: str, flags: frozenset[str], build: str, families: list[str], repack_name: str,
) -> None:
    host = HostKernels(machine, flags, parse_system_info(build))
    assert host.families() == [KernelFamily(f) for f in families]
    assert host.name(KernelFamily.REPACK) == repack_name


def test_the_summary_names_the_cpu_its_flags_and_the_build() -> None:
    host = HostKernels("x86_64", SPR_FLAGS | {"fpu"}, parse_system_info(SAPPHIRE_RAPIDS_BUILD), "Xeon 8488C")
    line = host.summary()
    assert line.startswith("Xeon 8488C: CPU flags avx2 avx512f avx512_vnni amx_tile amx_int8")
    assert "fpu" not in line and "AMX_INT8" in line and "REPACK" in line


SPR = HostKernels("x86_64", SPR_FLAGS, parse_system_info(SAPPHIRE_RAPIDS_BUILD))
CRASH = "crash on this host (SIGSEGV)"


@pytest.mark.parametrize(("trials", "family", "said"), [
    ([Probed(KernelFamily.AMX, None), Probed(KernelFamily.PLAIN, None)], KernelFamily.AMX, "AMX kernels"),
    ([Probed(KernelFamily.AMX, CRASH), Probed(KernelFamily.REPACK, None), Probed(KernelFamily.PLAIN, None)],
     KernelFamily.REPACK, "AMX kernels crash on this host (SIGSEGV); using AVX-512 repack kernels"),
    ([Probed(KernelFamily.AMX, CRASH), Probed(KernelFamily.REPACK, "give wrong logits (0.97 off)"),
      Probed(KernelFamily.PLAIN, None)], KernelFamily.PLAIN,
     "AMX kernels crash on this host (SIGSEGV); AVX-512 repack kernels give wrong logits (0.97 off); using plain "
     "AVX-512 kernels (no repacked weights)"),
    ([Probed(KernelFamily.AMX, CRASH), Probed(KernelFamily.REPACK, CRASH), Probed(KernelFamily.PLAIN, CRASH)], None,
     "no kernel family works here: AMX kernels crash on this host (SIGSEGV); AVX-512 repack kernels crash on this "
     "host (SIGSEGV); plain AVX-512 kernels (no repacked weights) crash on this host (SIGSEGV)"),
])
def test_what_a_copy_says_of_its_kernels(trials: list[Probed], family: KernelFamily | None, said: str) -> None:
    assert chosen(trials) is family
    assert notice(SPR, trials) == said
