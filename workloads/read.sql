-- Read :rows rows: a SELECT of the :rows consecutive keys of this target's key space that start
-- at a random existing key. One row is a point lookup (stays one tablet under hash sharding);
-- more rows are one index range scan.
-- Keys held by target `shard` of `nshards` are shard, shard + nshards, shard + 2*nshards, ...
\set k random(0, :shard_rows - :rows) * :nshards + :shard
\if :rows = 1
SELECT k, v FROM kv WHERE k = :k;
\else
SELECT k, v FROM kv WHERE k >= :k ORDER BY k LIMIT :rows;
\endif
