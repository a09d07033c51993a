-- tenure 004: reserved for the lease history migration, which replaces
-- this file. It changes nothing.
SELECT 1;
