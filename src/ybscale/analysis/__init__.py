"""From ceilings to conclusions: USL, effects, ANOVA, scale, strata, comparisons."""
