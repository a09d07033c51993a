-- Read the history (see the history_events function).
-- $1 name (null: every lease), $2 since (null: everything kept), $3 limit.
SELECT h.name, h.kind, h.holder_label, h.holder_instance, h.token,
       coalesce(h.previous_holder_label, ''), coalesce(h.previous_holder_instance, ''),
       coalesce(h.previous_token, 0), h.at, coalesce(h.window_key, '')
FROM {{history_events_fn}}($1::text, $2::timestamptz, $3::integer) AS h
