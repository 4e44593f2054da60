-------------------------------- MODULE MCkip279 --------------------------------
(***************************************************************************************)
(* KIP-279 with three replicas still lets a follower act on a stale leader's state      *)
(* (fixed by KIP-320's fencing by the current leader epoch).  Same bounds as MCkip101   *)
(* and MCkip320.  See docs/spec.md for the trace TLC finds and the invariant it breaks. *)
(***************************************************************************************)
EXTENDS TruncationKIP279, TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<2, 3, 1>>]

ReproNext ==
    \/ ProduceNext \/ FusedFetchNext \/ CrashNext \/ ControllerRequestsNext
    \/ \E c \in Brokers : BrokerChange(c)
=============================================================================
