-- revision 1
-- fence_reset(resource, to_token, reason): the operator's repair of a
-- poisoned fence. It sets the fence of resource to to_token (0 up to the
-- last token issued), records the reset in fence_resets and returns the
-- token it replaced. It runs as its caller (SECURITY INVOKER): only a role
-- that may write fences and fence_resets itself (the owner) can use it, and
-- reset_by names that role. A resource without a fence raises TF005.
CREATE OR REPLACE FUNCTION {{fence_reset_fn}}(resource text, to_token bigint, reason text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    p_resource ALIAS FOR $1;
    p_to       ALIAS FOR $2;
    p_reason   ALIAS FOR $3;
    issued     bigint;
    previous   bigint;
BEGIN
    IF p_resource IS NULL OR p_to IS NULL OR p_reason IS NULL THEN
        RAISE EXCEPTION 'tenure: fence reset: arguments must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_reason = '' THEN
        RAISE EXCEPTION 'tenure: fence reset: a reason is required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END INTO issued FROM {{token_seq}} AS s;
    IF p_to < 0 OR p_to > issued THEN
        RAISE EXCEPTION 'tenure: fence reset: token % for resource % is outside 0..% (the tokens issued so far)',
                p_to, quote_literal(p_resource), issued
            USING ERRCODE = 'TF004',
                  DETAIL = format('issued=%s offered=%s', issued, p_to);
    END IF;

    SELECT f.token INTO previous FROM {{fences}} AS f WHERE f.resource = p_resource FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenure: fence reset: resource % has no fence; nothing to reset', quote_literal(p_resource)
            USING ERRCODE = 'TF005';
    END IF;
    UPDATE {{fences}} AS f SET token = p_to, updated_at = clock_timestamp() WHERE f.resource = p_resource;
    INSERT INTO {{fence_resets}} (resource, old_token, new_token, reason, reset_by, session_role, reset_at)
    VALUES (p_resource, previous, p_to, p_reason, current_user, session_user, clock_timestamp());
    RETURN previous;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{fence_reset_fn}}(text, bigint, text) FROM PUBLIC;
