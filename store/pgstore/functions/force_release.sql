-- revision 1
-- force_release(name, holder_label, holder_instance, token): release, as
-- an operator's (tenure release --force): the same compare-and-set and
-- announcement, recorded as force-released. Returns what release returns.
CREATE OR REPLACE FUNCTION {{force_release_fn}}(p_name text, p_holder_label text, p_holder_instance text, p_token bigint)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    n bigint;
BEGIN
    PERFORM set_config('tenure.release_kind', 'force-released', true);
    n := {{release_fn}}(p_name, p_holder_label, p_holder_instance, p_token);
    PERFORM set_config('tenure.release_kind', '', true);
    RETURN n;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{force_release_fn}}(text, text, text, bigint) FROM PUBLIC;
