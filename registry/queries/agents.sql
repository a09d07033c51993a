-- Every agent as it is by the server's clock, with the number of resources
-- it owns, ordered by id.
-- (see the function agent_list in migration 002)
SELECT * FROM {{agent_list_fn}}()
