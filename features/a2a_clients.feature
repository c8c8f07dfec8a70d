Feature: Official A2A clients drive sid through the gateway
  As a team whose tools speak the published A2A protocol, 1.0 or 0.3
  I want the gateway to present sid as an A2A agent with a card, spec methods and spec streams
  So that any A2A client can use sid, while the seed dialect's clients keep working unchanged

  Background:
    Given a gateway bridging a sid agent

  Scenario: The agent card names both protocol versions
    When a client fetches the agent card
    Then the card lists a JSON-RPC interface for protocol "1.0" and one for protocol "0.3"
    And the card says the agent streams and reads and writes "text/plain"

  Scenario Outline: A streamed turn in each protocol version
    When an A2A "<version>" client streams "hi there" with <method>
    Then every event is a JSON-RPC response to the request's id
    And the first event is the task in state "<submitted>"
    And the last event puts the task in state "<completed>"
    And the streamed chunks add up to "Hello from the mock model."

    Examples:
      | version | method               | submitted            | completed            |
      | 1.0     | SendStreamingMessage | TASK_STATE_SUBMITTED | TASK_STATE_COMPLETED |
      | 0.3     | message/stream       | submitted            | completed            |

  Scenario: The agent asks, the A2A client answers with the task's id
    When an A2A "1.0" client sends "please use a tool" with SendMessage
    Then the task is in state "TASK_STATE_INPUT_REQUIRED" with the agent's question
    When the client answers "yes" with SendMessage naming that task
    Then the task is in state "TASK_STATE_COMPLETED" with the agent's question answered

  Scenario: A client of the seed dialect is unchanged
    When a client without A2A-Version sends "hi" with message/send
    Then the task comes back in the seed shape in state "completed"

  Scenario Outline: A2A failures keep A2A's error codes
    When an A2A "<version>" client calls <method> with <params>
    Then the answer is HTTP 200 with error code <code>

    Examples:
      | version | method                           | params                                             | code   |
      | 1.0     | GetTask                          | {"id": "no-such-task"}                             | -32001 |
      | 0.3     | tasks/get                        | {"id": "no-such-task"}                             | -32001 |
      | 1.0     | CreateTaskPushNotificationConfig | {"taskId": "t", "url": "http://93.184.216.34/h"}   | -32001 |
      | 1.0     | ListTasks                        | {"pageSize": 0}                                    | -32602 |
      | 1.0     | SubscribeToTask                  | {"id": "no-such-task"}                             | -32001 |
      | 1.0     | SendMessage                      | {"message": {"parts": [{"url": "http://x/a.png"}]}} | -32005 |
      | 2.0     | GetTask                          | {"id": "no-such-task"}                             | -32009 |
