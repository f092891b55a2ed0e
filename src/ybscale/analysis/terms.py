"""Names of the lines of the effects and ANOVA tables that are not factor effects (read by the
charts and the findings without the analysis' own imports)."""

ERROR_TERM = "error"  # the residual line: the noise the effects are judged against
BLOCK_TERM = "block"  # the replicate blocks' line
RESIDUAL = "residual"  # the ANOVA's error line within clusters (or the only one)
WHOLE_ERROR = "whole-plot error"  # the ANOVA's error line between clusters (split plot)
