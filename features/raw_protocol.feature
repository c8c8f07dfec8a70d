Feature: sid --raw JSONL protocol version 5
  As the sid bridge
  I want our own types for sid's wire format to read and write exactly what sid does
  So that nothing is lost between sid and HTTP clients

  Scenario Outline: Client request lines round-trip
    Given the raw client line <line>
    When I parse it as a client request and serialise it again
    Then the JSON value is unchanged
    And the serialised line has "op" equal to "<op>"

    Examples:
      | line                                                                                             | op              |
      | {"protocol_version":5,"request_id":"r-1","op":"user_turn","text":"hello"}                         | user_turn       |
      | {"protocol_version":5,"request_id":"r-2","op":"prompt_response","prompt_id":"prompt-1","response":"yes"} | prompt_response |
      | {"protocol_version":5,"request_id":"r-3","op":"shutdown"}                                         | shutdown        |
      | {"protocol_version":5,"request_id":"r-7","op":"show_agent"}                                       | show_agent      |
      | {"protocol_version":5,"request_id":"r-8","op":"save_transcript","path":"/tmp/out.json"}           | save_transcript |
      | {"protocol_version":5,"request_id":"r-9","op":"set_spend","dollars":5.0}                          | set_spend       |
      | {"protocol_version":5,"request_id":"r-10","op":"set_spend","dollars":null}                        | set_spend       |
      | {"protocol_version":5,"request_id":"r-11","op":"insert_system_message","text":"pin"}              | insert_system_message |

  Scenario Outline: Every server message type round-trips with a snake_case tag
    Given the raw server line <line>
    When I parse it as a server message and serialise it again
    Then the JSON value is unchanged
    And the serialised line has "type" equal to "<type>"

    Examples:
      | line                                                                                                                                                                                                          | type            |
      | {"type":"hello","protocol_version":5,"sequence":1,"session_id":"s","session_dir":"/d","workspace_root":"/w","current_agent":"a","model":"m","resumed":false,"startup_confirmation_required":false,"sandbox_available":true} | hello           |
      | {"type":"replay_complete","protocol_version":5,"sequence":9}                                                                                                                                                  | replay_complete |
      | {"type":"request","protocol_version":5,"sequence":4,"request_id":"r","op":"user_turn","text":"hello"}                                                                                                         | request         |
      | {"type":"result","protocol_version":5,"sequence":5,"request_id":"r","ok":true,"data":{"x":1}}                                                                                                                 | result          |
      | {"type":"result","protocol_version":5,"sequence":6,"request_id":"r","ok":false,"error":{"code":"busy","message":"server is busy"}}                                                                            | result          |
      | {"type":"prompt","protocol_version":5,"sequence":7,"request_id":"r","prompt_id":"p","kind":"confirmation","message":"ok?","choices":["yes","no"]}                                                              | prompt          |
      | {"type":"prompt_ack","protocol_version":5,"sequence":8,"request_id":"r","response_request_id":"rr","prompt_id":"p","response":"yes"}                                                                          | prompt_ack      |
      | {"type":"event","protocol_version":5,"sequence":3,"request_id":"r","event":"assistant_text_delta","label":null,"depth":0,"text":"hi"}                                                                         | event           |

  Scenario Outline: Every event variant uses its snake_case name
    Given the raw server line {"type":"event","protocol_version":5,"sequence":2,"request_id":"r",<fields>}
    When I parse it as a server message and serialise it again
    Then the JSON value is unchanged
    And the serialised line has "event" equal to "<event>"

    Examples:
      | event                  | fields                                                                                          |
      | agent_start            | "event":"agent_start","label":"build","depth":0                                                 |
      | agent_finish           | "event":"agent_finish","label":"build","depth":0,"stop_reason":"EndTurn"                        |
      | assistant_text_delta   | "event":"assistant_text_delta","label":"build","depth":0,"text":"Hello"                         |
      | thinking_delta         | "event":"thinking_delta","label":null,"depth":0,"text":"hmm"                                    |
      | info                   | "event":"info","label":null,"depth":0,"message":"[tokens]"                                      |
      | error                  | "event":"error","label":null,"depth":0,"message":"API error"                                    |
      | tool_use_start         | "event":"tool_use_start","label":"build","depth":0,"name":"bash","tool_use_id":"toolu_1"        |
      | tool_input_delta       | "event":"tool_input_delta","label":"build","depth":0,"partial_json":"{"                          |
      | tool_use_end           | "event":"tool_use_end","label":"build","depth":0                                                |
      | tool_result_start      | "event":"tool_result_start","label":"tool:bash","depth":1,"tool_use_id":"toolu_1","is_error":false |
      | tool_result_text_delta | "event":"tool_result_text_delta","label":"tool:bash","depth":1,"text":"hi"                      |
      | tool_result_end        | "event":"tool_result_end","label":"tool:bash","depth":1                                         |
      | response_finish        | "event":"response_finish","label":"build","depth":0                                             |
      | interrupted            | "event":"interrupted","label":"build","depth":0                                                 |
      | tool_output            | "event":"tool_output","tool_name":"bash","tool_use_id":"toolu_1","stream":"stdout","text":"hi"  |

  Scenario: Optional tool output fields are omitted when absent
    Given a tool_output event with text "hi" and no data_b64
    When I serialise the server message
    Then the serialised line has no member "data_b64"
    And the serialised line has "text" equal to "hi"

  Scenario: A result without data or error omits both
    Given an ok result for request "r" with no data
    When I serialise the server message
    Then the serialised line has no member "data"
    And the serialised line has no member "error"

  Scenario: A code-less error omits the code
    Given the raw server line {"type":"result","protocol_version":5,"sequence":8,"request_id":"e6","ok":false,"error":{"message":"(error (phase sid-cli))"}}
    When I parse it as a server message and serialise it again
    Then the JSON value is unchanged

  Scenario Outline: A missing sequence defaults to zero
    Given the raw server line <line>
    When I parse it as a server message
    Then its sequence is 0

    Examples:
      | line                                                                                                                                                                              |
      | {"type":"hello","protocol_version":2,"session_id":"s","session_dir":"/d","workspace_root":"/w","current_agent":"a","model":"m","resumed":false,"startup_confirmation_required":false,"sandbox_available":false} |
      | {"type":"replay_complete","protocol_version":2}                                                                                                                                   |
      | {"type":"request","protocol_version":2,"request_id":"r","op":"user_turn","text":"hello"}                                                                                          |

  Scenario Outline: Stamping a sequence onto any message
    Given the raw server line <line>
    When I parse it as a server message
    And I stamp it with sequence <n>
    Then its sequence is <n>

    Examples:
      | line                                                                                                                                       | n  |
      | {"type":"hello","protocol_version":5,"sequence":1,"session_id":"s","session_dir":"/d","workspace_root":"/w","current_agent":"a","model":"m","resumed":false,"startup_confirmation_required":false,"sandbox_available":false} | 42 |
      | {"type":"event","protocol_version":5,"sequence":0,"request_id":"r","event":"info","label":null,"depth":0,"message":"info"}                 | 99 |
      | {"type":"request","protocol_version":5,"sequence":0,"request_id":"r","op":"user_turn","text":"hello"}                                      | 6  |
      | {"type":"replay_complete","protocol_version":5,"sequence":0}                                                                               | 4  |
      | {"type":"prompt","protocol_version":5,"sequence":0,"request_id":"r","prompt_id":"p","kind":"confirmation","message":"ok?","choices":[]}    | 7  |
      | {"type":"prompt_ack","protocol_version":5,"sequence":0,"request_id":"r","response_request_id":"rr","prompt_id":"p","response":"yes"}       | 8  |
      | {"type":"result","protocol_version":5,"sequence":0,"request_id":"r","ok":true}                                                             | 3  |

  Scenario Outline: The accepted-request marker exists only for transcript requests
    Given the raw client line <line>
    When I build the accepted-request marker
    Then a marker <exists> for request "<id>"

    Examples:
      | line                                                                                    | exists | id       |
      | {"protocol_version":5,"request_id":"turn-1","op":"user_turn","text":"what did I ask?"}   | exists | turn-1   |
      | {"protocol_version":5,"request_id":"system-1","op":"insert_system_message","text":"pin"} | exists | system-1 |
      | {"protocol_version":5,"request_id":"stats","op":"stats"}                                 | is not built | stats |

  Scenario Outline: Every line sid 0.6.0 printed round-trips
    Given the recorded transcript "<file>"
    Then every line parses as a server message and re-serialises to the same JSON value

    Examples:
      | file            |
      | out_basic.jsonl |
      | out_err.jsonl   |
      | out_tool.jsonl  |
      | out_turn.jsonl  |
