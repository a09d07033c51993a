-- revision 1
-- acquire_slot(name, slots, holder_label, holder_instance, ttl_us, payload):
-- take the first free slot of name, the lease named name#k for k from 0 to
-- slots - 1 (store.SlotName), each by the acquire function's rules, in one
-- statement. Returns one row per slot tried: the held ones (acquired
-- false) and, when one was free, the slot taken (acquired true), after
-- which no slot is tried. No row is ever put in a line: a slot waiter
-- follows every slot and takes whichever frees first.
--
-- Two callers racing for the same slot meet at the acquire function's
-- ON CONFLICT: one takes it, the other is refused and tries the next
-- slot, so of N callers at most one gets each slot and every slot free
-- when the statement reached it is taken. A slot whose row another
-- transaction inserted and this one cannot see yet is asked again (each
-- statement of the function sees what was committed before it), three
-- times, then reported held by nobody with no time remaining: its holder
-- is about to be known, and the caller asks again at once.
CREATE OR REPLACE FUNCTION {{acquire_slot_fn}}(p_name text, p_slots integer, p_holder_label text, p_holder_instance text,
                                               p_ttl_us bigint, p_payload text)
RETURNS TABLE (slot integer, acquired boolean, holder_label text, holder_instance text, token bigint, seq bigint,
               remaining_us bigint, payload text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    r     record;
    k     integer;
    tries integer;
BEGIN
    IF p_name IS NULL OR p_slots IS NULL THEN
        RAISE EXCEPTION 'tenure: acquire_slot: arguments must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_name = '' OR p_slots < 1 OR p_slots > 256 THEN
        RAISE EXCEPTION 'tenure: acquire_slot: the name must not be empty and a name has 1 to 256 slots, not %', p_slots
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR k IN 0 .. p_slots - 1 LOOP
        tries := 0;
        LOOP
            tries := tries + 1;
            SELECT * INTO r
            FROM {{acquire_fn}}(p_name || '#' || k, p_holder_label, p_holder_instance, p_ttl_us, p_payload, false) AS a;
            EXIT WHEN FOUND OR tries >= 3;
        END LOOP;
        slot := k;
        IF NOT FOUND THEN
            acquired := false; holder_label := ''; holder_instance := ''; token := 0; seq := 0;
            remaining_us := 0; payload := '';
            RETURN NEXT;
            CONTINUE;
        END IF;
        acquired := r.acquired; holder_label := r.holder_label; holder_instance := r.holder_instance;
        token := r.token; seq := r.seq; remaining_us := r.remaining_us; payload := r.payload;
        RETURN NEXT;
        IF r.acquired THEN
            RETURN;
        END IF;
    END LOOP;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL names may call it.
REVOKE ALL ON FUNCTION {{acquire_slot_fn}}(text, integer, text, text, bigint, text) FROM PUBLIC;
