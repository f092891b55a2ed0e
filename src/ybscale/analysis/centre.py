"""Centre points beside blocks and beside factors without a middle: one least-squares fit of
every run, the factorial runs and the centre runs together, tested against the pure error.

Where the centre runs are all alike and the design is not blocked, the effects and the ANOVA
of Montgomery §6.8 hold (`ybscale.analysis.effects.center_points`, `anova.center_table`). Two
designs need more, and get this fit:

* **Blocks with centre runs in every block** (Myers, Montgomery & Anderson-Cook, *Response
  Surface Methodology*, ch. 7; R `rsm`'s ``rsm(y ~ Block + FO(...))``): the block enters the
  model first, so its sum of squares comes from all the runs (each block's mean, centre runs
  included); the curvature compares the centre runs with the corners *of their own block*;
  the pure error is the centre runs' spread about *their block's* mean. The spread between
  the blocks is never noise.
* **Centre runs beside a factor that has no middle** (read/write, 1 or 2 rubber bands:
  `ybscale.design.factorial.middle`), as Minitab and JMP run them: every numeric factor at its
  middle, the factor without one at each of its levels (NIST/SEMATECH e-Handbook 5.4.7.2, the
  catapult). A column made only of such factors (its main effect) is estimated from every run
  that sets it, the centre runs too; the others from the corners. The curvature compares the
  centre runs with the corners at the same level; the pure error is their spread at each level.

The model: y ~ block + every estimable column (one per alias group, named by its shortest
word, whose product of letters gives the centre runs' value: 0 when it holds a factor at its
middle) + the centre runs' indicator (the curvature, one df). Sequential sums of squares in
that order (the columns are orthogonal to the blocks in a regular blocking). The columns the
blocks are confounded with (`effects.block_columns`) are left out: they estimate the blocks.

Nothing is pooled: the **pure error** (runs at the same point of the same block: the centre
runs, and replicated corners) tests every line — each column, the blocks, the curvature, and
the **lack of fit** (what the model leaves beyond the pure error: the confounded columns' part
the centre runs separate from the blocks, a curvature that differs between the levels of a
factor without a middle). The effects table's t tests use the same error and df, so
``effects.csv`` and ``anova.csv`` agree. A design whose centre runs leave no pure error is
refused before this (`ybscale.analysis.responses`).

Effects are twice the fitted coefficients (mean at + minus mean at −, on the corners for a
column the centre runs do not set); each has its own standard error (a column the centre runs
set is estimated from more runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# statsmodels and scipy.stats are imported where a centre-point design is fitted: the findings
# job imports this module for every design, and they are half a second of its start

BLOCK_VAR = "block"
CURVE = "t_center"  # the centre runs' indicator


@dataclass(frozen=True)
class Centre:
    """The centre runs: their responses, their letters (0 at the middle, -1/+1 for a factor
    without one, at that level) and their blocks (None: not blocked)."""

    values: pd.Series
    signs: pd.DataFrame
    blocks: pd.Series | None = None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def held(self) -> list[str]:
        """The letters the centre runs hold at a level (the factors without a middle)."""
        return [c for c in self.signs.columns if bool((self.signs[c] != 0).any())]

    def needs_fit(self) -> bool:
        """Whether this module's fit is needed: centre runs in blocks, or beside a factor
        without a middle (else Montgomery §6.8's plain centre points)."""
        return len(self) > 0 and (self.blocks is not None or bool(self.held))

    def transformed(self, transform) -> Centre:
        return Centre(transform(self.values.astype(float)), self.signs, self.blocks)

    @classmethod
    def of(cls, responses: pd.DataFrame, response: str) -> Centre | None:
        """The centre runs `ybscale.analysis.responses.read_responses` kept apart (None
        without)."""
        centers = responses.attrs.get("center")
        if centers is None or not len(centers):
            return None
        signs = responses.attrs.get("center_signs")
        if signs is None:
            signs = pd.DataFrame(0, index=centers.index, columns=[])
        blocks = centers["block"].astype(str) if "block" in centers.columns else None
        return cls(centers[response].astype(float), signs, blocks)


@dataclass
class CentreFit:
    """The fit's numbers (module docstring); Series are indexed by term."""

    terms: list[str]
    effect: pd.Series
    std_error: pd.Series
    sum_sq: pd.Series
    confounded: list[str]
    ss_block: float
    df_block: int
    ss_curvature: float
    curvature: float  # the centre runs less the corners, within blocks and levels
    se_curvature: float
    ss_lof: float
    df_lof: int
    ss_pe: float
    df_pe: int
    sst: float  # about the mean of every run
    n_factorial: int
    n_center: int
    fit: object = None  # the statsmodels result (every run)
    levels: list[dict] = field(default_factory=list)  # per level of the held factors

    @property
    def ms_pe(self) -> float:
        return self.ss_pe / self.df_pe if self.df_pe > 0 else math.nan

    def p(self, ss: float, df: int) -> tuple[float, float]:
        """F and p of a line against the pure error."""
        if not self.df_pe > 0 or not self.ms_pe > 0 or df <= 0:
            return math.nan, math.nan
        from scipy import stats

        f = ss / df / self.ms_pe
        return f, float(stats.f.sf(f, df, self.df_pe))

    def curvature_info(self) -> dict:
        """The effects table's ``curvature`` attrs, as `effects.center_points` words them
        (``difference`` the corners less the centre runs)."""
        f, p = self.p(self.ss_curvature, 1)
        return {
            "n_center": self.n_center, "difference": -self.curvature, "ss": self.ss_curvature,
            "ss_pure_error": self.ss_pe, "df_pure_error": self.df_pe,
            "ms_pure_error": self.ms_pe, "f": f, "p": p, "std_error": self.se_curvature,
            "levels": self.levels,
        }  # fmt: skip


def _var(term: str) -> str:
    return f"t_{term}"


def centre_columns(terms: list[str], signs: pd.DataFrame) -> pd.DataFrame:
    """Each term's column at the centre runs: the product of its letters' signs (0 when one
    of them is at its middle)."""
    out = {}
    for term in terms:
        col = pd.Series(1.0, index=signs.index)
        for letter in term:
            col = col * (signs[letter].astype(float) if letter in signs else 0.0)
        out[term] = col
    return pd.DataFrame(out, index=signs.index)


def _pure_error(values: pd.Series, groups: list) -> tuple[float, int]:
    grouped = values.groupby(groups)
    ss = float(((values - grouped.transform("mean")) ** 2).sum())
    return ss, len(values) - int(grouped.ngroups)


def fit_centre(
    design, y: pd.Series, centre: Centre, blocks: pd.Series | None, confounded=()
) -> CentreFit:
    """The fit of the module docstring: `y` the factorial runs (design run ids, on the analysed
    scale), `centre` the centre runs (same scale), `blocks` run -> block of the factorial runs
    (None: not blocked; the centre runs' are `centre.blocks`), `confounded` the columns the
    blocks are confounded with (left out)."""
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    blocked = blocks is not None
    if blocked != (centre.blocks is not None):
        raise ValueError("the centre runs and the factorial runs must both have blocks or neither")
    terms = [t for t in design.terms if t not in confounded]
    x = design.model_matrix().loc[y.index, terms].astype(float)
    xc = centre_columns(terms, centre.signs.reindex(centre.values.index))
    data = pd.concat([x, xc]).rename(columns=_var)
    data[CURVE] = np.r_[np.zeros(len(x)), np.ones(len(xc))]
    values = pd.concat([y.astype(float), centre.values.astype(float)])
    data["y"] = values.to_numpy()
    rhs = [_var(t) for t in terms] + [CURVE]
    if blocked:
        labels = pd.concat([blocks.reindex(y.index), centre.blocks.reindex(centre.values.index)])
        data[BLOCK_VAR] = labels.astype(str).to_numpy()
        rhs.insert(0, f"C({BLOCK_VAR})")
    fit = smf.ols("y ~ " + " + ".join(rhs), data=data).fit()
    lm = anova_lm(fit, typ=1)
    rows = design.sign_table().loc[y.index, "row"].astype(str).tolist()
    held = centre.signs.reindex(centre.values.index)
    points = rows + ["c" + "".join(f"{int(v):+d}" for v in r) for r in held.to_numpy()]
    if blocked:
        points = [f"{b}|{p}" for b, p in zip(data[BLOCK_VAR], points, strict=True)]
    ss_pe, df_pe = _pure_error(values.reset_index(drop=True), points)
    df_res, ss_res = int(round(fit.df_resid)), float(fit.ssr)
    ms_pe = ss_pe / df_pe if df_pe > 0 else math.nan
    cov = fit.normalized_cov_params * ms_pe
    se = pd.Series({t: 2 * math.sqrt(cov.loc[_var(t), _var(t)]) for t in terms})
    block_line = lm.loc[f"C({BLOCK_VAR})"] if blocked else None
    return CentreFit(
        terms=terms,
        effect=pd.Series({t: 2 * float(fit.params[_var(t)]) for t in terms}),
        std_error=se,
        sum_sq=pd.Series({t: float(lm.loc[_var(t), "sum_sq"]) for t in terms}),
        confounded=list(confounded),
        ss_block=float(block_line["sum_sq"]) if blocked else 0.0,
        df_block=int(round(block_line["df"])) if blocked else 0,
        ss_curvature=float(lm.loc[CURVE, "sum_sq"]),
        curvature=float(fit.params[CURVE]),
        se_curvature=math.sqrt(cov.loc[CURVE, CURVE]),
        ss_lof=max(ss_res - ss_pe, 0.0),
        df_lof=df_res - df_pe,
        ss_pe=ss_pe,
        df_pe=df_pe,
        sst=float(((values - values.mean()) ** 2).sum()),
        n_factorial=len(y),
        n_center=len(centre),
        fit=fit,
        levels=_by_level(design, y, centre, ms_pe, df_pe),
    )


def _by_level(design, y: pd.Series, centre: Centre, ms_pe: float, df_pe: int) -> list[dict]:
    """At each level (combination) of the factors the centre runs hold at a level: the centre
    runs' mean less the corners' there, with its 95 % interval on the pure error ([] when the
    centre runs hold none)."""
    from scipy import stats

    held = centre.held
    if not held:
        return []
    signs = design.sign_table().loc[y.index, held]
    at = centre.signs.reindex(centre.values.index)[held]
    out = []
    for key, runs in at.groupby(held if len(held) > 1 else held[0]).groups.items():
        key = key if isinstance(key, tuple) else (key,)
        mask = (signs[held] == pd.Series(key, index=held)).all(axis=1)
        corners, middle = y[mask.to_numpy()], centre.values.loc[runs]
        diff = float(middle.mean() - corners.mean())
        se = math.sqrt(ms_pe * (1 / len(corners) + 1 / len(middle))) if df_pe > 0 else math.nan
        half = float(stats.t.ppf(0.975, df_pe)) * se if df_pe > 0 else math.nan
        p = float(2 * stats.t.sf(abs(diff) / se, df_pe)) if se > 0 else math.nan
        levels = {design.factor(k).name: design.factor(k).level(int(s))
                  for k, s in zip(held, key, strict=True)}  # fmt: skip
        out.append({
            "levels": levels, "n_center": len(middle), "n_factorial": len(corners),
            "center_mean": float(middle.mean()), "factorial_mean": float(corners.mean()),
            "difference": diff, "low": diff - half, "high": diff + half, "p": p,
        })  # fmt: skip
    return out
