"""The table and the chart of a benchmark run's results (see run.py for what is measured).

    python benchmarks/report.py results.json    # the markdown table of docs/benchmarks.md, from a saved run
"""

from __future__ import annotations

import json
import sys

import numpy as np


def fmt_time(s):
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_bytes(n):
    return f"{n / 2**30:.2f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def fmt_x(v):
    return f"{v:.2f}" if v >= 0.095 else f"{v:.3f}"  # compile ratios go down to ~0.005


def fmt_ratio(r):
    """'1.02× [0.97–1.08]': the median over rounds and its interquartile range."""
    return f"{fmt_x(r['median'])}× [{fmt_x(r['q1'])}–{fmt_x(r['q3'])}]"


def step_figure(r):
    """A suite's step ratio (the platforms' 10th-percentile step times; runs from before it have only the
    median of the round ratios)."""
    return r.get("tenth_percentiles", r["median"])


# A run's figure is flagged unstable when another run would likely give one more than 10% away: its
# processes' own ratios (independent samples, minutes apart) span more than that, or one platform's
# rounds were mostly disturbed (more than DISTURBED_BY slower than its step time, the 10th percentile:
# the machine took time from them, so the low end rests on few rounds).
UNSTABLE_SPREAD = 0.10
DISTURBED_BY = 1.25
MOSTLY_DISTURBED = 0.5


def stability(r):
    """How far a suite's step ratio may be trusted to repeat: the relative range of its processes'
    ratios, each platform's share of disturbed rounds, and whether that makes it unstable (with why)."""
    sr = r.get("step_ratio")
    if not sr:
        return None
    out = {"disturbed_rounds": {}, "why": []}
    medians = sr.get("process_medians") or []
    if len(medians) > 1:
        out["process_spread"] = max(medians) / min(medians) - 1 if min(medians) > 0 else float("inf")
        if out["process_spread"] > UNSTABLE_SPREAD:
            out["why"].append(f"its processes' ratios span {out['process_spread']:.0%}")
    for plat, p in r.get("platforms", {}).items():
        rounds, step = p.get("round_step_s"), p.get("step_s")
        if not rounds or not step:
            continue
        share = sum(t > DISTURBED_BY * step for t in rounds) / len(rounds)
        out["disturbed_rounds"][plat] = share
        if share > MOSTLY_DISTURBED:
            out["why"].append(f"{share:.0%} of {plat}'s rounds disturbed")
    out["unstable"] = bool(out["why"])
    return out


def fmt_step(r):
    """'1.02× [0.97–1.08]': the step ratio and the interquartile range of the rounds' own ratios."""
    return f"{fmt_x(step_figure(r))}× [{fmt_x(r['q1'])}–{fmt_x(r['q3'])}]"


def notes(r):
    out = []
    st = r.get("stability") or stability(r)
    if st and st["unstable"]:
        out.append("UNSTABLE: " + ", ".join(st["why"]))
    m, c = r["platforms"].get("metal", {}), r["platforms"].get("cpu", {})
    if "iteration_s" in m and "iteration_s" in c:
        out.append(f"per iteration {fmt_time(m['iteration_s'])} vs {fmt_time(c['iteration_s'])}")
    if "callbacks_per_step" in m and "step_s" in m and "step_s" in c:
        out.append(f"step with {m['callbacks_per_step']} host callback round trip: {fmt_time(m['step_s'])} vs "
                   f"{fmt_time(c['step_s'])}")
    rss = r.get("fresh_rss")
    if rss and "ratio" in rss:
        rm, rc = rss["metal"], rss["cpu"]
        out.append(f"peak RSS {rss['ratio']:.2f}× (+{fmt_bytes(rm['peak_rss'] - rm['baseline_rss'])} vs "
                   f"+{fmt_bytes(rc['peak_rss'] - rc['baseline_rss'])})")
    elif rss:
        out.append("peak RSS: " + "; ".join(f"{p} {v['error']}" for p, v in rss.items() if "error" in v))
    for plat, p in r["platforms"].items():
        if "error" in p:
            out.append(f"unsupported on {plat}: {p['error']}")
    return "; ".join(out)


def print_table(results):
    print(f"{'suite':<15}{'metal step':>11}{'cpu step':>11}  {'time ratio [rounds]':<22}{'compile ratio':<25}"
          f"{'copies':>6}  notes")
    for name, r in results["suites"].items():
        m, c = r["platforms"].get("metal", {}), r["platforms"].get("cpu", {})
        step = fmt_step(r["step_ratio"]) if "step_ratio" in r else "-"
        comp = fmt_ratio(r["compile_ratio"]) if "compile_ratio" in r else "-"
        print(f"{name:<15}{fmt_time(m.get('step_s')):>11}{fmt_time(c.get('step_s')):>11}  {step:<22}{comp:<25}"
              f"{str(m.get('copies', '-')):>6}  {notes(r)}")
    print("time ratio: metal/cpu step time, each the 10th percentile of the platform's rounds [interquartile range "
          "of the rounds' own ratios]; below 1 is faster. UNSTABLE: another run may differ by more than "
          f"{UNSTABLE_SPREAD:.0%} (processes' ratios apart, or a platform's rounds mostly over "
          f"{DISTURBED_BY:g}x its step time)")


def plot(results, path):
    """Bars for the step and compile ratios; lines for the rounds' own ratios (thick: IQR, thin: min-max)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(results["suites"])
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(names) + 2), 4.5))
    x = np.arange(len(names))
    series = [("step_ratio", "step time metal/cpu", -0.2), ("compile_ratio", "compile time metal/cpu", 0.2)]
    for key, label, dx in series:
        idx = [i for i, n in enumerate(names) if key in results["suites"][n]]
        rs = [results["suites"][names[i]][key] for i in idx]
        bars = np.array([step_figure(r) if key == "step_ratio" else r["median"] for r in rs])
        xs = x[idx] + dx
        ax.bar(xs, bars, 0.4, label=label)
        for lo, hi, width in (("q1", "q3", 2.5), ("min", "max", 0.8)):  # the rounds' own ratios
            ax.vlines(xs, [r[lo] for r in rs], [r[hi] for r in rs], color="black", linewidth=width)
    rss = [(i, results["suites"][n]["fresh_rss"]["ratio"]) for i, n in enumerate(names)
           if "ratio" in results["suites"][n].get("fresh_rss", {})]
    if rss:
        ax.scatter([x[i] for i, _ in rss], [r for _, r in rss], marker="D", color="crimson", zorder=3,
                   label="peak RSS metal/cpu (fresh process)")
    for i, n in enumerate(names):
        if "step_ratio" not in results["suites"][n]:
            ax.text(x[i], 1.0, "unsupported", rotation=90, ha="center", va="bottom", fontsize=8, color="dimgray")
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("ratio (lower is better)")
    s = results["settings"]
    ax.set_title(f"metal/cpu: step (10th percentiles) and compile (median) ratios over {s['repeat']} interleaved rounds; "
                 f"rounds' own ratios: IQR (thick), min–max (thin); "
                 f"{results['machine']['cores']} cores, load {results['machine']['load_avg_start'][0]:.1f}",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(results):
    """docs/benchmarks.md's table: step ratios with the rounds' IQR, compile ratios, each suite's notes."""
    m, s = results["machine"], results["settings"]
    isa = (s.get("isa") or {}).get("asked")
    lines = [f"<!-- {results['started'][:16]} UTC, {m.get('cpu')}, {m['cores']} cores, load average "
             f"{m['load_avg_start'][0]:.1f} -> {m['load_avg_end'][0]:.1f}, {s['repeat']} rounds, "
             f"{s['seconds']:g} s per suite{', --quick' if s['quick'] else ''}"
             f"{', both sides at ' + isa if isa else ''} -->",
             "| suite | step time metal/cpu [rounds' IQR] | compile time metal/cpu | notes |", "|---|---|---|---|"]
    for name, r in results["suites"].items():
        step = fmt_step(r["step_ratio"]) if "step_ratio" in r else "-"
        comp = f"{fmt_x(r['compile_ratio']['median'])}×" if "compile_ratio" in r else "-"
        lines.append(f"| {name} | {step} | {comp} | {notes(r)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(markdown(json.load(f)))
