-------------------------------- MODULE MCkip101 --------------------------------
(***************************************************************************************)
(* KIP-101 lets logs diverge under fast successive leader changes (fixed by KIP-279).   *)
(* Three replicas, assignment <<2, 3, 1>>, broker 1 is the controller.  Leader 2 writes  *)
(* a record that only broker 1 fetches; 2 dies and 3 leads (epoch 1) and writes a record*)
(* of its own; 3 dies before anyone fetched it and 1 leads (epoch 2).  When 3 returns   *)
(* it asks 1 for the end of epoch 1, which 1 never saw: KIP-101's leader answers with   *)
(* the start of its first later epoch (its log end), so 3 keeps its epoch-1 record at   *)
(* an offset where 1 has the epoch-0 record; both HWs pass it.  Violates                *)
(* ReplicaLogsAgree.  Fetches and truncations are fused rounds.                         *)
(***************************************************************************************)
EXTENDS TruncationKIP101, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<2, 3, 1>>]

ReproNext ==
    \/ ProduceNext \/ FusedFetchNext \/ CrashNext \/ ControllerRequestsNext
    \/ \E c \in Brokers : BrokerChange(c)
=============================================================================
