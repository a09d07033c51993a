-- revision 1
-- fence_foreign(resource, token) is fence for tokens of another lease store
-- (etcd, Consul, Redis), which this database cannot check: it takes any
-- positive token. Config.GrantSQL does not grant it: a role that may call it
-- can raise any fence of this prefix to any value.
CREATE OR REPLACE FUNCTION {{fence_foreign_fn}}(resource text, token bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    p_resource ALIAS FOR $1;
    p_token    ALIAS FOR $2;
    recorded   bigint;
BEGIN
    IF p_resource IS NULL OR p_token IS NULL THEN
        RAISE EXCEPTION 'tenure: fence: resource and token must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_token <= 0 THEN
        RAISE EXCEPTION 'tenure: fence: token % for resource % must be positive', p_token, quote_literal(p_resource)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    INSERT INTO {{fences}} AS f (resource, token, updated_at)
    VALUES (p_resource, p_token, clock_timestamp())
    ON CONFLICT (resource) DO UPDATE
        SET token = excluded.token, updated_at = excluded.updated_at
        WHERE f.token <= excluded.token
    RETURNING f.token INTO recorded;

    IF NOT FOUND THEN
        SELECT f.token INTO recorded FROM {{fences}} AS f WHERE f.resource = p_resource;
        RAISE EXCEPTION 'tenure: fenced: resource % already accepted token %; token % is stale (its holder was superseded)',
                quote_literal(p_resource), recorded, p_token
            USING ERRCODE = 'TF001',
                  DETAIL = format('recorded=%s offered=%s', recorded, p_token),
                  HINT = 'roll back and stop working under this token';
    END IF;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{fence_foreign_fn}}(text, bigint) FROM PUBLIC;
