---------------------------------- MODULE MCops ----------------------------------
(***************************************************************************************)
(* Controller operations: controlled shutdown, preferred election (requested and         *)
(* automatic), reassignment of <<1, 2>> to <<2, 3>>, topic deletion and re-creation,    *)
(* with broker crashes and controller failover, default knobs (KIP-320).  No records:   *)
(* this instance checks the controller (state machines, store, epochs, fencing); the    *)
(* replication invariants hold trivially on empty logs.                                  *)
(***************************************************************************************)
EXTENDS KafkaControllerOps, TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<1, 2>>]
MC_Targets == {<<2, 3>>}
=============================================================================
