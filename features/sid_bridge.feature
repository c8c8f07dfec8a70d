Feature: A browser watches a sid turn over Server-Sent Events
  As a web page showing what a sid coding agent is doing
  I want to start a turn with one JSON-RPC call and watch its updates as SSE
  So that I can render the agent's answer, its tool calls and its questions as they happen

  Background:
    Given a gateway bridging a sid agent

  Scenario: Watching a plain turn from start to finish
    When the page starts a turn saying "hi there" with message/stream
    Then the first update says the task is "submitted"
    And the answer text streams in as "Hello from the mock model."
    And the last update says the task is "completed" and is final
    And the stream closes after the final update

  Scenario: Answering the agent's question from the page
    When the page sends "please use a tool" with message/send
    Then the task waits for input with the question's choices "yes" and "no"
    When the page answers "yes" to that task
    Then the task is "completed"
    And the task's stream shows the tool's output "hi"

  Scenario: Reloading the page resumes where it left off
    Given the page watched a finished turn and saw its 4th update
    When the page reconnects with that update's id as Last-Event-ID
    Then it receives every later update exactly once and nothing earlier
