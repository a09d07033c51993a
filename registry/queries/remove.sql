-- Remove the ownership of resource $1 from agent $2 (locked by
-- lock_owner.sql in the same transaction) and record why, as a history row
-- with an empty to_agent. $3 reason, $4 whether the agent was alive, $5 its
-- last heartbeat (NULL if unknown).
-- (see the function owner_remove in migration 002)
SELECT * FROM {{owner_remove_fn}}($1::text, $2::text, $3::text, $4::boolean, $5::timestamptz)
