"""The fusion decision of every adjacent pair of the corpus's launch sequences."""

from __future__ import annotations

from dataclasses import dataclass

from corpus.scenarios import HERE, Scenario, Step, as_launch, scenarios
from sarek_py.fusion.epilogue.sequence import fuse_launches, host_segments
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.launch_text import parse_host
from sarek_py.ir.parser import parse_module

#: scenario -> its launch text with the original's host counts (symbolic sizes), for the
#: scenarios written in the launch text (LCH-16; n-D launches TXT-37)
LAUNCH_TEXT: dict[str, str] = {
    "vectorAdd -> biasRelu": "vectorAdd_biasRelu.launches",
    "MatrixMulCUDA -> add_bias -> biasRelu": "matrixMul_bias_relu.launches",
    "matmul_forward_kernel1 -> add_bias -> gelu_forward_kernel1 -> residual_forward_kernel1":
        "llm_bias_gelu_residual.launches",
    "residual_forward_kernel1 -> softmax_forward_kernel1": "residual_softmax.launches",
    "srad -> srad2": "srad.launches",
    "convolution2D_kernel -> threshold2D": "conv_threshold.launches",
    "fdtd_step1_kernel -> fdtd_step2_kernel -> fdtd_step3_kernel": "fdtd2d.launches",
    "mm2_kernel1 -> mm2_kernel2": "mm2.launches",
    "residual_forward_kernel1 -> layernorm_forward_kernel1": "residual_layernorm.launches",
    "stage1 -> stage2 -> stage3": "sarek_fusion_chain.launches",
    "runJacobiCUDA_kernel1 -> runJacobiCUDA_kernel2 -> runJacobiCUDA_kernel1":
        "jacobi2D.launches",
    "residual_forward_kernel1 -> softmax_forward_kernel2": "residual_softmax2.launches",
    "residual_forward_kernel1 -> softmax_forward_online_kernel1":
        "residual_softmax_online.launches",
    "residual_forward_kernel1 -> mean_kernel -> rstd_kernel -> normalization_kernel":
        "residual_layernorm2.launches",
    "srad_cuda_1 -> srad_cuda_2": "srad_v2.launches",
    "convolution3D_kernel(i = 1) -> convolution3D_kernel(i = 2)": "conv3d.launches",
}


@dataclass(frozen=True)
class PairDecision:
    scenario: str
    producer: Step
    consumer: Step
    #: "fused", "refused" or "not expressible" (the launch record cannot hold the
    #: original launch, LCH-1: the finding, the launch is not changed)
    outcome: str
    rule: str | None
    reason: str | None
    fused: Launch | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.producer.name, self.consumer.name)

    @property
    def row(self) -> tuple[str, str | None, str | None]:
        return (self.outcome, self.rule, self.reason)


def decide(sc: Scenario) -> list[PairDecision]:
    out = []
    for p, c in zip(sc.steps, sc.steps[1:], strict=False):
        lp, lc = as_launch(p), as_launch(c)
        if isinstance(lp, str) or isinstance(lc, str):
            why = lp if isinstance(lp, str) else lc
            assert isinstance(why, str)
            out.append(PairDecision(sc.name, p, c, "not expressible", "LCH-1", why))
            continue
        new, report = fuse_launches([lp, lc])
        d = report[0]
        if d.fused:
            out.append(PairDecision(sc.name, p, c, "fused", None, None, new[0]))
        else:
            out.append(PairDecision(sc.name, p, c, "refused", d.rule, d.reason))
    return out


def all_decisions() -> list[PairDecision]:
    return [d for sc in scenarios() for d in decide(sc)]


def module_text(sc: Scenario) -> str:
    """The .sk files of the scenario's kernels, one after the other (one module)."""
    return "\n".join((HERE / f).read_text() for f in dict.fromkeys(s.file for s in sc.steps))


def decide_symbolic(sc: Scenario) -> dict[tuple[str, str], tuple[str, str | None, str | None]]:
    """Each pair of the scenario's launch text (the original's counts over symbolic host
    sizes, tests/corpus/*.launches): (outcome, rule, reason), or "run ends" when the
    launches are not one straight run (the reason the run ends)."""
    name = LAUNCH_TEXT.get(sc.name)
    if name is None:
        return {}
    m = parse_module(module_text(sc), f"{sc.name}.sk")
    _, stmts = parse_host((HERE / name).read_text(), m, name)
    out: dict[tuple[str, str], tuple[str, str | None, str | None]] = {}
    launches = [st for st in stmts if isinstance(st, Launch)]
    for p, c in zip(launches, launches[1:], strict=False):
        segs = host_segments([p, c])
        both = [seg for seg in segs if len(seg.launches) == 2]
        key = (p.kernel.name, c.kernel.name)
        if both:
            _, report = fuse_launches(list(both[0].launches))
            d = report[0]
            out[key] = (("fused", None, getattr(d, "note", None)) if d.fused
                        else ("refused", d.rule, d.reason))
        else:
            why = next((seg.break_reason for seg in segs if seg.break_reason), None)
            out[key] = ("not one run", None, why)
    return out


def all_symbolic() -> dict[tuple[str, str], tuple[str, str | None, str | None]]:
    out = {}
    for sc in scenarios():
        out.update(decide_symbolic(sc))
    return out
