Feature: Following a plan's domain events as SSE task updates
  As a client migrating from the legacy agent server to JSON-RPC
  I want the legacy server's domain events as the same SSE task updates the sid bridge sends
  So that one client library follows both

  Scenario: A client follows one plan from creation to checkpoint
    Given the legacy server's event feed publishes this plan's life
      | event_id | event_type         | plan_id | data                                    |
      | 1        | PLAN_CREATED       | plan-7  | {"state": "submitted"}                  |
      | 2        | plan.created       | plan-8  | {"state": "submitted"}                  |
      | 3        | plan.phase_changed | plan-7  | {"state": "working", "phase": "apply"}  |
      | 4        | user.login         | plan-7  | {}                                      |
      | 5        | CHECKPOINT_CREATED | plan-7  | {"checkpoint": "cp-1"}                  |
    And a gateway reading that feed
    When the client follows task "plan-7" on GET /events
    Then it receives these updates
      | id | event                   | params                                                    |
      | 1  | TaskStatusUpdateEvent   | {"taskId": "plan-7", "state": "submitted"}                |
      | 3  | TaskStatusUpdateEvent   | {"taskId": "plan-7", "state": "working", "phase": "apply"} |
      | 5  | TaskArtifactUpdateEvent | {"taskId": "plan-7", "checkpoint": "cp-1"}                |
