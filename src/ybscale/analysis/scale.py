"""The scale of the analysis, chosen from the data (``analysis.model: auto``).

Box–Cox (1964) profile likelihood of λ for the linear model of the effects:
z(λ) = (y^λ − 1)/λ (log y at λ = 0), L(λ) = −n/2·log(SSE(λ)/n) + (λ − 1)·Σ log y, maximised
with scipy's bounded scalar minimiser. The interval is Montgomery's small-sample one (Design and
Analysis of Experiments, 8th ed., §15.1.1): the λ whose SSE is at most
SS* = SSE(λ̂)·(1 + t²(α/2, ν)/ν), ν the model's residual df, i.e.
{λ : L(λ) ≥ L(λ̂) − n/2·log(1 + t²/ν)} (roots found with scipy's brentq; an end that does not
fall within ±3 is reported as ±3). With 8 residual df it is about twice as wide as the
asymptotic χ²₁ interval, whose coverage on 16 runs is below its 95 %.
SSE(λ) is the residual sum of squares of the least-squares fit (numpy's pseudo-inverse).

Which model. Replicated designs: every estimable term (the residual is pure error). An
unreplicated 2^(k-p) fitted with every term is saturated (zero residual df, L undefined), so the
profile uses a reduced model, as Montgomery does for unreplicated factorials (Example 6.3: fit,
look at the effects on the normal plot, transform, refit). The scale and the model are chosen
together: each scale proposes its model, the main effects plus the interaction columns Lenth
finds active (|effect| > ME) on that scale; the (scale, model) pair with the larger
AIC-penalised Box–Cox likelihood, L(λ = 1 or 0 | model) − (number of columns), is the one λ is
profiled on (the Jacobian term makes L comparable across scales). An interaction that exists
only because of the scale appears on the additive scale alongside the main effects it comes
from, and costs that model its columns; a real interaction on the original scale keeps the
additive model's likelihood high where the log model leaves it in the residual (Montgomery's
injection-moulding 2^(6-2), Example 8.4: A, B and AB, additive). The reason says which model λ
was profiled on. With fewer than ``MIN_DF`` residual df (e.g. a saturated resolution-III
fraction) no λ is estimated and the additive scale is kept, saying why.

Decision, a scale the interval excludes is never used: log (multiplicative) when the interval
includes 0 and excludes 1; additive when it includes 1 and excludes 0; when it includes neither,
the nearer of the two to λ̂, and the reason says that neither fits. When it includes both (a
tie), the data cannot tell the scales apart, and a rule that reads the noise there (the model
each scale proposes, or which predicts each run better) flips from one study of a system to the
next (issue 57: 2 of 8 analyses of one design kept additive at such a tie): the scale is then a
property of the response, not of the data. A response that spans ``RANGE_SCREEN``× or more
(throughput, latency, cost: ratios, whose effects multiply) is analysed on the log scale, always;
the reason says the tie rule decided. Jain's ymax/ymin screen (Jain 1991, on transformations;
Montgomery: a transformation makes little difference when the ratio is below 2 or 3): below
``RANGE_SCREEN`` the additive scale is kept when the interval includes 1 (at a tie too).
A study can also take its scale from an earlier study of the same system (``analysis.model``,
which `ybscale next` and `ybscale compare` print): then the scale is forced, and says so.

Diagnostics on the chosen scale: residual normality (Shapiro–Wilk,
``pingouin.normality``) and homoscedasticity across fitted values (Levene, median-centred
(Brown–Forsythe), between the runs fitted below and above the median,
``pingouin.homoscedasticity``; both scipy's tests underneath).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy.special import boxcox, stdtrit  # scipy.stats' own, without its import

from ybscale.analysis.effects import contrasts, lenth

AUTO = "auto"
RANGE_SCREEN = 3.0
MIN_DF = 2
LAMBDA_BOUND = 3.0
CONFIDENCE = 0.95
COLUMNS = [
    "model_choice",
    "boxcox_lambda",
    "boxcox_low",
    "boxcox_high",
    "range_ratio",
    "scale_reason",
    "normality_p",
    "homoscedasticity_p",
]


@dataclass(frozen=True)
class ScaleChoice:
    """The analysed scale, how it was chosen, and the evidence."""

    model: str  # additive | multiplicative
    choice: str  # auto | forced
    lam: float = math.nan
    low: float = math.nan
    high: float = math.nan
    ratio: float = math.nan
    reason: str = ""
    terms: tuple[str, ...] = ()
    df_resid: int = 0
    normality_p: float = math.nan
    homoscedasticity_p: float = math.nan

    def columns(self) -> dict:
        """The values of the effects table's scale columns (``COLUMNS``)."""
        return {
            "model_choice": self.choice,
            "boxcox_lambda": self.lam,
            "boxcox_low": self.low,
            "boxcox_high": self.high,
            "range_ratio": self.ratio,
            "scale_reason": self.reason,
            "normality_p": self.normality_p,
            "homoscedasticity_p": self.homoscedasticity_p,
        }

    def to_dict(self) -> dict:
        return asdict(self)


def main_effect_terms(design) -> list[str]:
    """The estimable column of each factor's main effect (each column once)."""
    out = []
    for term, members in design.alias_groups():
        if any(len(m.lstrip("-")) == 1 for m in members) and term not in out:
            out.append(term)
    return out


def model_on(design, z: pd.Series, alpha: float = 0.05) -> list[str]:
    """The main effects plus the interaction columns beyond Lenth's own t(m/3) margin in `z`.
    A model search, not a verdict: the conservative margin keeps the interactions a scale
    invents from entering (issue 45's stability was measured with it); the effects table's
    verdicts use the one rule (Ye & Hamada's critical values, `effects.lenth`)."""
    main = main_effect_terms(design)
    effect = contrasts(design, z)
    me = lenth(effect.to_numpy(), alpha)["me_t"]
    return main + [t for t in design.terms if t not in main and abs(effect[t]) > me]


def profile_terms(design, y: pd.Series | None = None, alpha: float = 0.05) -> list[str]:
    """The model the profile likelihood is computed on (see the module docstring): every term
    when replicated; else the model of the scale (additive or log) that `y` fits best."""
    if design.replications > 1:
        return list(design.terms)
    if y is None:
        return main_effect_terms(design)
    return candidate_models(design, y, alpha)[0][1]


def candidate_models(design, y: pd.Series, alpha: float = 0.05) -> list[tuple[str, list[str]]]:
    """[(scale, model)] best first by AIC-penalised Box–Cox likelihood: each scale's model
    (model_on) at its λ (1: additive, 0: log); only the additive one when y is not positive or
    a model leaves fewer than MIN_DF residual df."""
    y = y.astype(float)
    out = []
    scales = [("additive", 1.0, y)]
    if bool((y > 0).all()):  # no log of a response that is not positive (nor its warnings)
        scales.append(("multiplicative", 0.0, np.log(y)))
    for scale, lam, z in scales:
        terms = model_on(design, z, alpha)
        if len(y) - 1 - len(terms) < MIN_DF:
            continue
        resid = residual_maker(_x(design, y.index, terms))
        out.append((profile_loglik(lam, y.to_numpy(), resid) - len(terms), scale, terms))
    out.sort(key=lambda c: -c[0])
    return [(scale, terms) for _, scale, terms in out] or [("additive", main_effect_terms(design))]


def residual_maker(x: np.ndarray) -> np.ndarray:
    """I − X X⁺: multiplies a response into its OLS residuals on x."""
    return np.eye(len(x)) - x @ np.linalg.pinv(x)


def profile_loglik(lam: float, y: np.ndarray, resid: np.ndarray) -> float:
    """Box–Cox profile log-likelihood of λ; `resid` = residual_maker(x) of the model."""
    e = resid @ boxcox(y, lam)
    ssr = float(e @ e)
    n = len(y)
    jacobian = (lam - 1.0) * float(np.log(y).sum()) if lam != 1.0 else 0.0  # λ = 1: none
    return -n / 2.0 * math.log(ssr / n) + jacobian


def box_cox(y, x, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(λ̂, low, high): maximum of the profile likelihood and Montgomery's interval (SS*)."""
    from scipy import optimize  # here: the jobs that only read the scale's words skip it

    y = np.asarray(y, dtype=float)
    x = np.asarray(x, dtype=float)
    nu = len(y) - int(np.linalg.matrix_rank(x))
    x = residual_maker(x)
    best = optimize.minimize_scalar(
        lambda lam: -profile_loglik(lam, y, x),
        bounds=(-LAMBDA_BOUND, LAMBDA_BOUND),
        method="bounded",
    )
    lam = float(best.x)
    t = float(stdtrit(nu, 0.5 + confidence / 2.0))  # the t quantile, as scipy.stats.t.ppf
    cut = -float(best.fun) - len(y) / 2.0 * math.log(1.0 + t * t / nu)

    def above(v: float) -> float:
        return profile_loglik(v, y, x) - cut

    low = -LAMBDA_BOUND
    if above(low) < 0:
        low = float(optimize.brentq(above, low, lam))
    high = LAMBDA_BOUND
    if above(high) < 0:
        high = float(optimize.brentq(above, lam, high))
    return lam, low, high


TIE_RULE = "the tie rule"


def decide(lam: float, low: float, high: float, ratio: float) -> tuple[str, str]:
    """(model, reason) from λ's interval and the ymax/ymin ratio (module docstring)."""
    where = f"Box–Cox λ = {lam:.2f} [{low:.2f}, {high:.2f}], ymax/ymin = {ratio:.3g}"
    has_log, has_additive = low <= 0.0 <= high, low <= 1.0 <= high
    if ratio < RANGE_SCREEN and has_additive:
        return "additive", (
            f"{where}: the interval includes 1 and the responses span less than "
            f"{RANGE_SCREEN:g}×, too narrow a range for the scale to matter; additive kept"
        )
    if has_log and has_additive:
        return "multiplicative", (
            f"{where}: a tie, the interval includes both 0 (log) and 1 (additive), so the data "
            f"cannot tell the scales apart; {TIE_RULE} decided: a response spanning "
            f"{RANGE_SCREEN:g}× or more is a ratio, analysed on the log scale, always"
        )
    if has_additive:
        return "additive", f"{where}: the interval includes 1 (no transformation) and excludes 0"
    if has_log:
        return "multiplicative", f"{where}: the interval includes 0 (log) and excludes 1"
    model = "multiplicative" if lam < 0.5 else "additive"
    word = "log" if model == "multiplicative" else "additive"
    return model, (
        f"{where}: the interval includes neither 0 (log) nor 1 (additive); neither scale fits "
        f"well, the nearer one ({word}) is used"
    )


def uncertain(low: float, high: float, ratio: float) -> bool:
    """λ's interval holds both 0 and 1 on a range wide enough for the scale to matter."""
    return ratio >= RANGE_SCREEN and low <= 0.0 <= high and low <= 1.0 <= high


def _x(design, index, terms) -> np.ndarray:
    matrix = design.model_matrix().loc[index, list(terms)].astype(float)
    return np.column_stack([np.ones(len(matrix)), matrix.to_numpy()])  # the constant first


def residual_checks(z: pd.Series, x: np.ndarray) -> tuple[float, float]:
    """(Shapiro–Wilk p, Levene p across low/high fitted values, median-centred) of OLS of z on
    x, by pingouin (`normality`, `homoscedasticity`: scipy's tests, their p-values as they
    are)."""
    import pingouin  # heavy (about two seconds): only when the checks run
    from statsmodels.regression.linear_model import OLS

    fit = OLS(z.to_numpy(), x).fit()
    resid = pd.Series(np.asarray(fit.resid))
    if len(resid) < 4 or float(resid.std()) == 0:
        return math.nan, math.nan
    normal = float(pingouin.normality(resid.to_numpy(), method="shapiro")["pval"].iloc[0])
    fitted = np.asarray(fit.fittedvalues)
    half = np.where(fitted > np.median(fitted), "high", "low")
    if len(set(half)) < 2:
        return normal, math.nan
    groups = [resid[half == "low"].to_numpy(), resid[half == "high"].to_numpy()]
    equal = pingouin.homoscedasticity(groups, method="levene", center="median")["pval"].iloc[0]
    return normal, float(equal)


def model_words(design, terms) -> str:
    """How the reasons name the profiled model: ``the main effects + AB, AD``."""
    if design.replications > 1:
        return "every term (pure error)"
    extra = [t for t in terms if t not in main_effect_terms(design)]
    return "the main effects" + (f" + {', '.join(extra)}" if extra else " only")


def choose(
    design, y: pd.Series, model: str = AUTO, checks: bool = True, alpha: float = 0.05
) -> ScaleChoice:
    """The scale to analyse `y` (one response per run id) on: `model` when forced, else
    chosen by the Box–Cox profile likelihood (on the model of profile_terms) and the ymax/ymin
    screen; `checks` adds the residual diagnostics on the chosen scale."""
    y = y.astype(float)
    positive = bool((y > 0).all())
    ratio = float(y.max() / y.min()) if positive else math.nan
    terms = tuple(profile_terms(design, y, alpha))
    x = _x(design, y.index, terms)
    df_resid = len(y) - 1 - len(terms)
    lam = low = high = math.nan
    on = f"; λ profiled on {model_words(design, terms)}"
    if model == "multiplicative" and not positive:  # refused before any log is taken
        bad = y.index[(y <= 0).to_numpy()][0]
        raise ValueError(f"multiplicative model needs positive responses; {bad} is {y[bad]}")
    if model != AUTO:
        chosen, how, reason = model, "forced", f"{model} set in analysis.model"
    elif not positive:
        chosen, how, reason = "additive", AUTO, "some responses are not positive: no log scale"
    elif df_resid < MIN_DF:
        chosen, how = "additive", AUTO
        reason = (
            f"the main-effects model leaves {df_resid} residual df (fewer than {MIN_DF}): "
            "no Box–Cox estimate; additive kept"
        )
    else:
        lam, low, high = box_cox(y.to_numpy(), x)
        chosen, reason = decide(lam, low, high, ratio)
        reason, how = reason + on, AUTO
    if positive and df_resid >= MIN_DF and math.isnan(lam):
        lam, low, high = box_cox(y.to_numpy(), x)
    found = (math.nan, math.nan)
    if checks and df_resid >= MIN_DF:
        found = residual_checks(np.log10(y) if chosen == "multiplicative" else y, x)
    return ScaleChoice(chosen, how, lam, low, high, ratio, reason, terms, df_resid, *found)


def annotate(table: pd.DataFrame, choice: ScaleChoice) -> pd.DataFrame:
    """The effects table with the scale columns (the same value on every line)."""
    out = table.copy()
    for name, value in choice.columns().items():
        out[name] = value
    return out


def read_choice(effects: pd.DataFrame) -> ScaleChoice | None:
    """The ScaleChoice recorded in an effects table (None for tables written before it)."""
    if "model_choice" not in effects.columns or effects.empty:
        return None
    first = effects.iloc[0]

    def num(name: str) -> float:
        return float(first[name]) if pd.notna(first[name]) else math.nan

    return ScaleChoice(
        model=str(first["model"]),
        choice=str(first["model_choice"]),
        lam=num("boxcox_lambda"),
        low=num("boxcox_low"),
        high=num("boxcox_high"),
        ratio=num("range_ratio"),
        reason=str(first["scale_reason"]) if pd.notna(first["scale_reason"]) else "",
        normality_p=num("normality_p"),
        homoscedasticity_p=num("homoscedasticity_p"),
    )
