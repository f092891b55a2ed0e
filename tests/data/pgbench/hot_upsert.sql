\set k random(1, 5)
BEGIN;
SELECT v FROM kv WHERE k = :k;
INSERT INTO kv VALUES (:k, 'x') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
END;
