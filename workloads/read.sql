-- Read :rows rows: the :rows consecutive keys of this target's key space that start at a drawn
-- existing key, each reached by the key, on every sharding. One row is a point lookup; more
-- rows are one statement with the keys as an array (k = ANY: an index condition on the primary
-- key, never a scan of the table): with range sharding they lie in one tablet, with hash
-- sharding (`gcp.table_sharding: hash`, and YugabyteDB's own PRIMARY KEY (k) under `none`)
-- they are spread over the tablets, which YugabyteDB reads by hash, a batch per tablet. A range
-- predicate (k >= :k ORDER BY k LIMIT :rows) would scan and sort the whole table under hash
-- sharding: hash-sharded rows are stored in the order of their hash, not of k.
-- Keys held by target `shard` of `nshards` are shard, shard + nshards, shard + 2*nshards, ...
-- The start is drawn uniformly over every loaded key (workload.distribution: uniform, :distribution
-- 0), or from pgbench's bounded Zipfian distribution with parameter :distribution (zipfian: the
-- first keys of each target the most often).
-- (bigint casts: pgbench -M prepared sends the variables as parameters of no type; a key of a
-- range above 2^31 must not be read as an integer)
\if :distribution > 0
\set k random_zipfian(0, :shard_rows - :rows, :distribution) * :nshards + :shard
\else
\set k random(0, :shard_rows - :rows) * :nshards + :shard
\endif
\if :rows = 1
SELECT k, v FROM kv WHERE k = :k;
\else
SELECT k, v FROM kv WHERE k = ANY (ARRAY(
  SELECT generate_series(:k::bigint, :k::bigint + (:rows::bigint - 1) * :nshards::bigint,
                         :nshards::bigint)));
\endif
