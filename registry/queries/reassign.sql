-- Move resource $1 to agent $2 (locked by lock_owner.sql in the same
-- transaction) and record why. $3 previous agent, $4 reason, $5 whether the
-- previous agent was alive, $6 its last heartbeat (NULL if unknown).
-- (see the function owner_reassign in migration 002)
SELECT * FROM {{owner_reassign_fn}}($1::text, $2::text, $3::text, $4::text, $5::boolean, $6::timestamptz)
