-- tenure 002: the token sequence hands out one value at a time.
-- A sequence with CACHE n > 1 gives each session n values at once, so two
-- sessions draw out of order (one takes 1..20, the next 21..40, and the
-- first then hands out 2 after 21): a takeover could get a token lower than
-- one handed out before it, which breaks promise P2. CACHE 1 is the
-- default of CREATE SEQUENCE, which 001 uses; this sets it on a sequence
-- that was made or altered otherwise. Running it again does no harm.
ALTER SEQUENCE {{token_seq}} CACHE 1;
