-- Read :rows rows: a SELECT of the :rows consecutive keys of this target's key space that start
-- at a drawn existing key. One row is a point lookup (stays one tablet under hash sharding);
-- more rows are one index range scan.
-- Keys held by target `shard` of `nshards` are shard, shard + nshards, shard + 2*nshards, ...
-- The start is drawn uniformly over every loaded key (workload.distribution: uniform, :distribution
-- 0), or from pgbench's bounded Zipfian distribution with parameter :distribution (zipfian: the
-- first keys of each target the most often).
\if :distribution > 0
\set k random_zipfian(0, :shard_rows - :rows, :distribution) * :nshards + :shard
\else
\set k random(0, :shard_rows - :rows) * :nshards + :shard
\endif
\if :rows = 1
SELECT k, v FROM kv WHERE k = :k;
\else
SELECT k, v FROM kv WHERE k >= :k ORDER BY k LIMIT :rows;
\endif
