-- revision 1
-- list_leases(): every lease as it is by the server's clock, with its
-- payload, in byte order of name. Read only.
CREATE OR REPLACE FUNCTION {{list_leases_fn}}()
RETURNS TABLE (name text, holder_label text, holder_instance text, token bigint, seq bigint,
               acquired_at timestamptz, released boolean, held boolean, remaining_us bigint, payload text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_at, l.released,
           NOT l.released AND l.expires_at > clock_timestamp(),
           greatest(0, floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000000))::bigint,
           l.payload
    FROM {{leases}} AS l
    ORDER BY l.name COLLATE "C";
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{list_leases_fn}}() FROM PUBLIC;
