-- revision 2
-- history_read(name, since, limit): the most recent limit events at or
-- after since (every event when null) of the lease name (of every lease
-- when null), oldest first. Read only; the read-only role may call it.
-- It leaves out the events of the windows, which libraries older than
-- them (the callers of this function) do not know; history_events has
-- them.
CREATE OR REPLACE FUNCTION {{history_read_fn}}(p_name text, p_since timestamptz, p_limit integer)
RETURNS TABLE (name text, kind text, holder_label text, holder_instance text, token bigint,
               previous_holder_label text, previous_holder_instance text, previous_token bigint,
               at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'tenure: history: the limit must be between 1 and 10000, not %', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT r.name, r.kind, r.holder_label, r.holder_instance, r.token,
           r.previous_holder_label, r.previous_holder_instance, r.previous_token, r.at
    FROM (
        SELECT h.id, h.name, h.kind, h.holder_label, h.holder_instance, h.token,
               h.previous_holder_label, h.previous_holder_instance, h.previous_token, h.at
        FROM {{history}} AS h
        WHERE (p_name IS NULL OR h.name = p_name)
          AND (p_since IS NULL OR h.at >= p_since)
          AND h.window_key IS NULL
        ORDER BY h.at DESC, h.id DESC
        LIMIT p_limit
    ) AS r
    ORDER BY r.at, r.id;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{history_read_fn}}(text, timestamptz, integer) FROM PUBLIC;
