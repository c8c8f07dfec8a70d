Feature: Migrating a method safely
  As a platform team moving the plan methods from the legacy server to a JSON-RPC server
  I want to compare the new server's answers first, move a slice of callers, and fall back by itself
  So that no caller is hurt by the move, and I know who still speaks legacy

  Background:
    Given a legacy plan server named "old"
    And a JSON-RPC plan server named "new"

  Scenario: Shadow first: the new server's answers are compared, callers only see the old one's
    Given a gateway routing "plan.*" to "old", shadowed to "new" ignoring "/result/updated_at"
    When a caller calls "plan.get"
    And a caller calls "plan.get" for which the new server answers state "done"
    Then every caller got state "running" from the "legacy" server
    And the migration report counts 1 match and 1 difference at "/result/state"

  Scenario: A canary: a tenth of the callers move, each keeps its side
    Given a gateway splitting "plan.*" between "old" weight 90 and "new" weight 10
    When 500 callers each call "plan.get" twice
    Then between 7 and 13 percent of the callers were served by the "jsonrpc" server
    And every caller was served by one server only
    And the migration report counts 1000 calls over the two sides

  Scenario: The canary misbehaves and is rolled back by itself
    Given a broken JSON-RPC server named "broken"
    And a gateway splitting "plan.*" between "old" weight 50 and "broken" weight 50, rolled back past 5 percent errors over 10 calls
    When 100 callers each call "plan.get" once
    Then the migration report shows "broken" rolled back because it "exceeds max_error_rate 0.05"
    And now every caller is served by the "legacy" server

  Scenario: Who still speaks legacy
    Given a gateway routing "plan.*" to "new"
    When a legacy client with token "team-a-token" calls "plan.get" 3 times
    And a JSON-RPC client with token "team-b-token" calls "plan.list" once
    Then the migration report shows a caller with 3 "legacy" calls of "plan.get"
    And the migration report shows a caller with 1 "jsonrpc" call of "plan.list"
    And no token appears in the migration report
