-- revision 1
-- fence(resource, token) records token as the highest token resource has
-- accepted, or raises SQLSTATE TF001 when a greater one was recorded
-- before. An equal token passes. A token the token sequence never issued
-- (greater than its last value) raises SQLSTATE TF004 and changes nothing.
-- It locks the resource's fence row until the calling transaction ends, so
-- fenced writes to one resource commit in token order; a rolled-back
-- transaction leaves the fence as it was.
CREATE OR REPLACE FUNCTION {{fence_fn}}(resource text, token bigint)
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
    issued     bigint;
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

    SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END INTO issued FROM {{token_seq}} AS s;
    IF p_token > issued THEN
        RAISE EXCEPTION 'tenure: fence: token % for resource % was never issued (the highest token issued is %); refused',
                p_token, quote_literal(p_resource), issued
            USING ERRCODE = 'TF004',
                  DETAIL = format('issued=%s offered=%s', issued, p_token),
                  HINT = 'a fence accepts only tokens its lease store handed out; fence tokens of another store with fence_foreign';
    END IF;

    INSERT INTO {{fences}} AS f (resource, token, updated_at)
    VALUES (p_resource, p_token, clock_timestamp())
    ON CONFLICT (resource) DO UPDATE
        SET token = excluded.token, updated_at = excluded.updated_at
        WHERE f.token <= excluded.token
    RETURNING f.token INTO recorded;

    IF NOT FOUND THEN
        -- The row is locked by the INSERT above; this reads its latest version.
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
REVOKE ALL ON FUNCTION {{fence_fn}}(text, bigint) FROM PUBLIC;
