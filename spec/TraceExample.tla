------------------------------- MODULE TraceExample -------------------------------
(***************************************************************************************)
(* A hand-written trace in the format TraceKafka validates (docs/spec.md, "Trace        *)
(* validation"): two brokers, broker 1 wins the controller election, an operator        *)
(* creates orders-0 on <<1, 2>>, the controller makes 1 the leader, a record is produced *)
(* and broker 2 fetches it twice (learning the HW the second time).  It observes only    *)
(* controller, controller_epoch, leader, leader_epoch, isr, role, log and hw.  No leader *)
(* and no controller are NoLeader (-1), and so is the actor of env, admin and client.   *)
(***************************************************************************************)
EXTENDS TraceKafka

ExampleBrokers == {1, 2}
ExamplePartitions == {"orders-0"}
ExampleAssignment == [p \in ExamplePartitions |-> <<1, 2>>]

P == "orders-0"

\* Observed state after an event (all eight observed variables, full values).
S(ctl, ce, ldr, le, isrSet, roles, logs, hws) ==
    [controller |-> ctl, controller_epoch |-> ce,
     leader |-> [p \in ExamplePartitions |-> ldr], leader_epoch |-> [p \in ExamplePartitions |-> le],
     isr |-> [p \in ExamplePartitions |-> isrSet],
     role |-> [b \in ExampleBrokers |-> [p \in ExamplePartitions |-> roles[b]]],
     log |-> [b \in ExampleBrokers |-> [p \in ExamplePartitions |-> logs[b]]],
     hw |-> [b \in ExampleBrokers |-> [p \in ExamplePartitions |-> hws[b]]]]

R1 == <<0, 1>>   \* the record: leader epoch 0, record id 1

ExampleTraceLog == <<
    [action |-> "Init", actor |-> NoLeader,
     state |-> S(NoLeader, 0, NoLeader, -1, {}, <<"absent", "absent">>, <<<<>>, <<>>>>, <<0, 0>>)],
    [action |-> "ControllerElect", actor |-> 1,
     state |-> S(1, 1, NoLeader, -1, {}, <<"absent", "absent">>, <<<<>>, <<>>>>, <<0, 0>>)],
    [action |-> "ControllerElect", actor |-> 2,
     state |-> S(1, 1, NoLeader, -1, {}, <<"absent", "absent">>, <<<<>>, <<>>>>, <<0, 0>>)],
    [action |-> "CreateTopic", actor |-> NoLeader,
     state |-> S(1, 1, NoLeader, -1, {}, <<"absent", "absent">>, <<<<>>, <<>>>>, <<0, 0>>)],
    [action |-> "TopicChange", actor |-> 1,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"absent", "absent">>, <<<<>>, <<>>>>, <<0, 0>>)],
    [action |-> "LeaderAndIsr", actor |-> 1,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "absent">>, <<<<>>, <<>>>>, <<0, 0>>)],
    [action |-> "LeaderAndIsr", actor |-> 2,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "follower">>, <<<<>>, <<>>>>, <<0, 0>>)],
    [action |-> "Produce", actor |-> NoLeader,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "follower">>, <<<<R1>>, <<>>>>, <<0, 0>>)],
    [action |-> "SendFetch", actor |-> 2,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "follower">>, <<<<R1>>, <<>>>>, <<0, 0>>)],
    [action |-> "Fetch", actor |-> 1,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "follower">>, <<<<R1>>, <<>>>>, <<0, 0>>)],
    [action |-> "FetchResponse", actor |-> 2,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "follower">>, <<<<R1>>, <<R1>>>>, <<0, 0>>)],
    [action |-> "SendFetch", actor |-> 2,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "follower">>, <<<<R1>>, <<R1>>>>, <<0, 0>>)],
    [action |-> "Fetch", actor |-> 1,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "follower">>, <<<<R1>>, <<R1>>>>, <<1, 0>>)],
    [action |-> "FetchResponse", actor |-> 2,
     state |-> S(1, 1, 1, 0, {1, 2}, <<"leader", "follower">>, <<<<R1>>, <<R1>>>>, <<1, 1>>)]
>>
=============================================================================
