Feature: Migrating an agent server one method at a time
  As a platform team moving from the legacy agent server to a JSON-RPC 2.0 server
  I want wiregate to route each method to whichever server now serves it
  So that legacy clients and JSON-RPC clients keep working while methods move

  Background:
    Given a legacy upstream named "old"
    And a JSON-RPC upstream named "new"

  Scenario: Before the move both clients reach the legacy server
    Given a gateway routing "plan.*" to "old"
    When a JSON-RPC client calls "plan.get" with id 41
    Then the JSON-RPC client gets a result for id 41 served by "legacy"
    When a legacy client calls "plan.get" with request_id "L-1"
    Then the legacy client gets a success for "L-1" served by "legacy"

  Scenario: After the move both clients reach the JSON-RPC server, other methods stay
    Given a gateway routing "plan.get" to "new" and "*" to "old"
    When a JSON-RPC client calls "plan.get" with id 42
    Then the JSON-RPC client gets a result for id 42 served by "jsonrpc"
    When a legacy client calls "plan.get" with request_id "L-2"
    Then the legacy client gets a success for "L-2" served by "jsonrpc"
    When a JSON-RPC client calls "plan.list" with id 43
    Then the JSON-RPC client gets a result for id 43 served by "legacy"

  Scenario Outline: Errors keep their meaning on either side of the move
    Given a gateway routing "missing" to "<server>"
    When a JSON-RPC client calls "missing" with id 7
    Then the JSON-RPC client gets error code -32001 for id 7
    When a legacy client calls "missing" with request_id "L-7"
    Then the legacy client gets error code "NOT_FOUND" for "L-7"

    Examples:
      | server |
      | old    |
      | new    |

  Scenario: Metrics show which clients still speak legacy
    Given a gateway routing "plan.*" to "new"
    When a legacy client calls "plan.audit" with request_id "L-9"
    And a JSON-RPC client calls "plan.audit" with id 9
    Then the metrics count 1 legacy call and 1 JSON-RPC call of "plan.audit" to "new"
