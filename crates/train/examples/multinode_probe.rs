//! Does Burn's multi-node all-reduce work in the Burn we build with? Two processes on this
//! machine play two nodes of one device each (Flex): node 0 hosts Burn's global orchestrator,
//! both register with the global parameters, then all-reduce a 64-float tensor `ROUNDS` times.
//! A data-parallel training step needs hundreds of such calls (one per parameter tensor).
//!
//! `cargo run --release -p segburn-train --example multinode_probe [-- ROUNDS TIMEOUT_S STRATEGY]`
//! with STRATEGY `ring` (Burn's default between nodes), `tree` or `centralized`.
//!
//! Exit status 0: every round finished on both nodes with the right sum. 1: a node failed or
//! the nodes were still waiting at the time-out (what Burn 0.21.0 does at round 2; see the
//! README's "Several machines").

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use burn::backend::Flex;
use burn::collective::{
    all_reduce, finish_collective, register, AllReduceStrategy, CollectiveConfig, PeerId,
    ReduceOperation,
};
use burn::tensor::{Tensor, TensorPrimitive};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("node") {
        let number = |i: usize| -> u64 {
            args.get(i)
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| fail(&format!("node: argument {i} must be a number")))
        };
        let strategy = strategy(args.get(6).map_or("ring", String::as_str));
        node(
            number(2) as u32,
            number(3) as u16,
            number(4) as u16,
            number(5) as u32,
            strategy,
        );
        return;
    }
    let rounds: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let timeout = Duration::from_secs(args.get(2).and_then(|a| a.parse().ok()).unwrap_or(60));
    let strategy_name = args.get(3).cloned().unwrap_or_else(|| "ring".into());
    println!(
        "2 nodes, global strategy {:?}, {rounds} round(s)",
        strategy(&strategy_name)
    );
    let ports = free_ports::<3>();
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("own path: {e}")));
    let mut children: Vec<Child> = (0..2u16)
        .map(|rank| {
            Command::new(&exe)
                .args(["node", &rank.to_string(), &ports[0].to_string()])
                .arg(ports[1 + rank as usize].to_string())
                .arg(rounds.to_string())
                .arg(&strategy_name)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| fail(&format!("cannot start node {rank}: {e}")))
        })
        .collect();
    // Burn's own log lines go to the same stdout; keep only ours ("node …").
    let readers: Vec<_> = children
        .iter_mut()
        .filter_map(|c| c.stdout.take())
        .map(|out| {
            std::thread::spawn(move || {
                BufReader::new(out)
                    .lines()
                    .map_while(Result::ok)
                    .filter(|l| l.starts_with("node "))
                    .inspect(|l| println!("{l}"))
                    .count()
            })
        })
        .collect();
    let started = Instant::now();
    let mut statuses = [None, None];
    while started.elapsed() < timeout && statuses.iter().any(Option::is_none) {
        for (child, status) in children.iter_mut().zip(statuses.iter_mut()) {
            if status.is_none() {
                *status = child.try_wait().ok().flatten();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    let lines: usize = readers.into_iter().filter_map(|r| r.join().ok()).sum();
    let ok = statuses.iter().all(|s| s.is_some_and(|s| s.success()));
    let expected = 2 * rounds as usize;
    if ok && lines == expected {
        println!("multi-node all-reduce works: {rounds} round(s) on 2 nodes");
    } else {
        println!(
            "multi-node all-reduce FAILED: {lines} of {expected} node-rounds finished; node exit \
             statuses after {:.0} s: {statuses:?} (None: still waiting, killed)",
            started.elapsed().as_secs_f64()
        );
        std::process::exit(1);
    }
}

fn strategy(name: &str) -> AllReduceStrategy {
    match name {
        "ring" => AllReduceStrategy::Ring,
        "tree" => AllReduceStrategy::Tree(2),
        "centralized" => AllReduceStrategy::Centralized,
        other => fail(&format!(
            "strategy {other:?}: expected ring, tree or centralized"
        )),
    }
}

fn node(
    rank: u32,
    orchestrator_port: u16,
    data_port: u16,
    rounds: u32,
    strategy: AllReduceStrategy,
) {
    if rank == 0 {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| fail(&format!("orchestrator runtime: {e}")));
        std::thread::spawn(move || {
            runtime.block_on(burn_collective::start_global_orchestrator(
                orchestrator_port,
            ))
        });
    }
    let address = |port: u16| -> burn_communication::Address {
        format!("ws://127.0.0.1:{port}")
            .parse()
            .unwrap_or_else(|e: String| fail(&e))
    };
    let config = CollectiveConfig::default()
        .with_num_devices(1)
        .with_num_nodes(2)
        .with_global_address(address(orchestrator_port))
        .with_node_address(address(data_port))
        .with_data_service_port(data_port)
        .with_global_all_reduce_strategy(strategy);
    let peer = PeerId::from(rank);
    let device = Default::default();
    register::<Flex>(peer, device, config)
        .unwrap_or_else(|e| fail(&format!("node {rank}: register: {e:?}")));
    for round in 1..=rounds {
        let started = Instant::now();
        let mine = Tensor::<Flex, 1>::full([64], (rank + 1) as f32 * round as f32, &device);
        let summed = all_reduce::<Flex>(peer, mine.into_primitive().tensor(), ReduceOperation::Sum)
            .unwrap_or_else(|e| fail(&format!("node {rank}: all-reduce {round}: {e:?}")));
        let summed = Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(summed));
        let values = summed.into_data().to_vec::<f32>().unwrap_or_default();
        let expected = 3.0 * round as f32; // (1 + 2) × round
        if values.len() != 64 || values.iter().any(|&v| v != expected) {
            fail(&format!(
                "node {rank}: all-reduce {round} gave {:?}, expected {expected}",
                values.first()
            ));
        }
        println!(
            "node {rank}: all-reduce {round} = {expected} in {:.3} s",
            started.elapsed().as_secs_f64()
        );
    }
    let _ = finish_collective::<Flex>(peer);
}

/// `N` distinct free ports (all held open until each is known).
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| {
            TcpListener::bind(("127.0.0.1", 0))
                .unwrap_or_else(|e| fail(&format!("no free port: {e}")))
        })
        .collect();
    std::array::from_fn(|i| {
        listeners[i]
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_else(|e| fail(&format!("no free port: {e}")))
    })
}

fn fail(message: &str) -> ! {
    eprintln!("{message}");
    println!("node ?: error: {message}");
    std::process::exit(2)
}
