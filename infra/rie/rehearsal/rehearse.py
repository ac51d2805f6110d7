#!/usr/bin/env python3
"""Deploy rehearsal: transform template.yaml with aws-sam-translator (as `sam deploy` does),
create what the result declares in moto (and the tables in DynamoDB Local), and check that
every function's environment names a resource that exists and every IAM statement names a
resource the stack creates. Prints a short report; exits non-zero on any failure.

Usage: rehearse.py --template template.yaml --moto URL --dynamodb URL [--stage rehearsal]
"""
import argparse, copy, json, logging, os, re, sys, time

import boto3
from samtranslator.parser import parser
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse

REGION, ACCOUNT, PARTITION = "us-east-1", "123456789012", "aws"
# Stripe's default live-mode limit of 100 write requests a second times 0.5 s, a slow call.
PROVIDER_CONCURRENCY = 50


# Parameters that have no default (an operator must give them): a rehearsal's stand-ins.
REHEARSAL_PARAMS = {"JwtIssuer": "https://issuer.rehearsal.test/", "JwtAudience": "twice-rehearsal"}


# The SecureString parameters and the name each has in a stage by default (/twice/<stage>/...).
SECRET_PARAMS = {"StripeApiKeyParameter": "stripe-api-key", "StripeWebhookSecretParameter": "stripe-webhook-secret",
                 "StandardWebhookSecretParameter": "standard-webhook-secret", "ConsoleSessionKeyParameter": "ops-session-key"}


class Unresolved(Exception):
    pass


def check_parameters(cfn, params):
    """What CloudFormation refuses before it creates anything: a value outside its parameter's
    AllowedPattern, AllowedValues, MinValue or MaxValue, and a rule whose assertion fails."""
    out = []
    for name, d in cfn.get("Parameters", {}).items():
        v = str(params.get(name))
        if d.get("Type") == "Number":
            try:
                n = float(v)
            except ValueError:
                out.append(f"parameter {name}={v!r}: not a number")
                continue
            if ("MinValue" in d and n < float(d["MinValue"])) or ("MaxValue" in d and n > float(d["MaxValue"])):
                out.append(f"parameter {name}={v}: outside {d.get('MinValue')}..{d.get('MaxValue')}")
        if "AllowedPattern" in d and not re.fullmatch(d["AllowedPattern"], v):
            out.append(f"parameter {name}={v!r}: {d.get('ConstraintDescription', 'does not match ' + d['AllowedPattern'])}")
        if "AllowedValues" in d and v not in [str(x) for x in d["AllowedValues"]]:
            out.append(f"parameter {name}={v!r}: not one of {d['AllowedValues']}")
    for name, rule in cfn.get("Rules", {}).items():
        if "RuleCondition" in rule and not cond(rule["RuleCondition"], params):
            continue
        for a in rule.get("Assertions", []):
            if not cond(a["Assert"], params):
                out.append(f"rule {name}: {a.get('AssertDescription', 'an assertion fails')}")
    return out


def transform(template, overrides):
    """The template after the SAM transform, as `sam deploy` sends it, and the parameter values
    (defaults, then overrides). sam build/package would upload CodeUri and DefinitionUri; the
    translator accepts S3 locations, so they are substituted the way `sam package` does."""
    root = os.path.dirname(os.path.abspath(template))
    with open(template) as f:
        sam = yaml_parse(f.read())
    for r in sam["Resources"].values():
        p = r.get("Properties", {})
        if r["Type"] == "AWS::Serverless::StateMachine" and "DefinitionUri" in p:
            with open(os.path.join(root, p.pop("DefinitionUri"))) as f:
                p["Definition"] = json.load(f)
    sam.setdefault("Globals", {}).setdefault("Function", {})["CodeUri"] = "s3://rehearsal-bucket/code.zip"
    params = {k: v.get("Default") for k, v in sam.get("Parameters", {}).items()}
    params.update(overrides)
    missing = sorted(k for k, v in params.items() if v is None)
    if missing:
        raise SystemExit(f"parameters without a value (no default, not given): {', '.join(missing)}")
    session = boto3.session.Session(region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test")
    # The translator logs a feature-toggle notice per function on stdout's logger; keep the
    # report readable.
    logging.getLogger("samtranslator").setLevel(logging.ERROR)
    cfn = Translator({}, parser.Parser(), boto_session=session).translate(sam_template=sam, parameter_values=dict(params))
    return cfn, params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", required=True)
    ap.add_argument("--moto", required=True)
    ap.add_argument("--dynamodb", required=True)
    ap.add_argument("--stage", default="rehearsal" + str(int(time.time()) % 100000))
    ap.add_argument("--param", action="append", default=[], help="a template parameter, Name=Value (repeatable)")
    ap.add_argument("--emitters", default="{}", help='JSON {"Metric": ["function", ...]}: who writes each Twice metric')
    args = ap.parse_args()
    phys_stage[0] = args.stage

    overrides = dict(REHEARSAL_PARAMS, Stage=args.stage, DeletionProtection="false")
    overrides.update(kv.split("=", 1) for kv in args.param)
    cfn, params = transform(args.template, overrides)
    res = cfn["Resources"]
    refused = check_parameters(cfn, params)
    if refused:
        print(f"== deploy rehearsal (stage {args.stage}): CloudFormation would refuse the parameters; nothing created")
        for r in refused:
            print("   PROBLEM  " + r)
        return 1
    conds = {k: cond(v, params) for k, v in cfn.get("Conditions", {}).items()}

    kw = dict(region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test")
    moto = lambda svc: boto3.client(svc, endpoint_url=args.moto, **kw)
    ddb = boto3.client("dynamodb", endpoint_url=args.dynamodb, **kw)

    phys, created, lacks, problems = {}, [], [], []
    types = {}
    for lid, r in res.items():
        if conds.get(r.get("Condition"), True):
            types.setdefault(r["Type"], []).append(lid)

    def ev(x):
        return resolve(x, params, phys, conds)

    # SSM parameters: SecureStrings an operator creates before the first deploy, under the
    # names a parameter gives or, by default, the stage's own (/twice/<stage>/<name>); the
    # functions' environment must name exactly these (check 1).
    ssm_names = {params[p] or f"/twice/{args.stage}/{n}" for p, n in SECRET_PARAMS.items()}
    for n in ssm_names:
        moto("ssm").put_parameter(Name=n, Value="rehearsal", Type="SecureString", Overwrite=True)
    created.append(f"SSM parameters: {len(ssm_names)} SecureString (created by an operator before deploy)")

    handlers = {
        "AWS::DynamoDB::Table": lambda lid, p: make_table(ddb, lid, p, ev, phys, lacks),
        "AWS::SQS::Queue": lambda lid, p: make_queue(moto("sqs"), lid, p, ev, phys),
        "AWS::SNS::Topic": lambda lid, p: make_topic(moto("sns"), lid, p, ev, phys),
        "AWS::Events::EventBus": lambda lid, p: make_event_bus(moto("events"), lid, p, ev, phys),
        "AWS::KMS::Key": lambda lid, p: make_key(moto("kms"), lid, p, ev, phys),
        "AWS::KMS::Alias": lambda lid, p: make_key_alias(moto("kms"), lid, p, ev, phys),
        "AWS::CloudWatch::Dashboard": lambda lid, p: make_dashboard(moto("cloudwatch"), lid, p, ev, phys),
        "AWS::CodeDeploy::Application": lambda lid, p: make_codedeploy_app(moto("codedeploy"), lid, p, ev, phys),
        "AWS::CodeDeploy::DeploymentGroup": lambda lid, p: make_deployment_group(moto("codedeploy"), lid, p, ev, phys, lacks),
        "AWS::Lambda::Version": lambda lid, p: make_version(lid, p, ev, phys),
        "AWS::Lambda::Alias": lambda lid, p: make_alias(lid, p, ev, phys),
        "AWS::Logs::LogGroup": lambda lid, p: make_log_group(moto("logs"), lid, p, ev, phys),
        "AWS::IAM::Role": lambda lid, p: make_role(moto("iam"), lid, p, ev, phys),
        "AWS::Lambda::Function": lambda lid, p: make_function(lid, p, ev, phys),
        "AWS::StepFunctions::StateMachine": lambda lid, p: make_state_machine(moto("stepfunctions"), lid, p, ev, phys),
        "AWS::ApiGatewayV2::Api": lambda lid, p: make_api(moto("apigatewayv2"), lid, p, ev, phys),
        "AWS::Scheduler::Schedule": lambda lid, p: make_schedule(moto("scheduler"), lid, p, ev, phys),
        "AWS::CloudWatch::Alarm": lambda lid, p: make_alarm(moto("cloudwatch"), lid, p, ev, phys),
    }
    pending = [lid for lid, r in res.items() if r["Type"] in handlers and conds.get(r.get("Condition"), True)]
    # Create in dependency order: a resource whose references are not created yet waits a round.
    for _ in range(len(pending) + 1):
        waiting = []
        for lid in pending:
            try:
                handlers[res[lid]["Type"]](lid, res[lid].get("Properties", {}))
            except Unresolved:
                waiting.append(lid)
        if not waiting or len(waiting) == len(pending):
            pending = waiting
            break
        pending = waiting
    for lid in pending:
        problems.append(f"{lid}: references that never resolve")

    for t, lids in sorted(types.items()):
        if t in handlers and t not in ("AWS::Lambda::Function", "AWS::Lambda::Version", "AWS::Lambda::Alias"):
            made = [l for l in lids if l in phys]
            created.append(f"{t}: {len(made)}/{len(lids)}")
    not_supported = {
        "AWS::Lambda::Function": "moto runs Lambda code only in Docker; functions were resolved and checked, not created",
        "AWS::Lambda::Version": "needs the functions in moto's Lambda (Docker); resolved, not created",
        "AWS::Lambda::Alias": "needs the functions in moto's Lambda (Docker); resolved and checked, not created",
        "AWS::Lambda::EventInvokeConfig": "needs the functions in moto's Lambda (Docker); checked below",
        "AWS::Lambda::EventSourceMapping": "needs the functions in moto's Lambda (Docker)",
        "AWS::Lambda::Permission": "needs the functions in moto's Lambda (Docker)",
        "AWS::ApiGatewayV2::Stage": "the $default stage is implicit in moto's HTTP API",
    }
    for t, why in not_supported.items():
        if t in types:
            lacks.append(f"{t} x{len(types[t])}: {why}")
    others = sorted(set(types) - set(handlers) - set(not_supported))
    for t in others:
        lacks.append(f"{t} x{len(types[t])}: not created (declared only)")

    # Check 1: every function's environment names resources that exist.
    table_names = {n for page in ddb.get_paginator("list_tables").paginate() for n in page["TableNames"]}
    queue_urls = {u for page in moto("sqs").get_paginator("list_queues").paginate() for u in page.get("QueueUrls", [])}
    machines = {m["stateMachineArn"] for m in moto("stepfunctions").list_state_machines()["stateMachines"]}
    checked = 0
    for lid in types.get("AWS::Lambda::Function", []):
        envv = ev(res[lid]["Properties"].get("Environment", {}).get("Variables", {}))
        for k, v in envv.items():
            ok = True
            if v == "":
                continue  # an optional setting left empty (TWICE_OIDC_CLIENT_SECRET_PARAM)
            if k.startswith("TWICE_TABLE_"):
                ok = v in table_names
            elif k.endswith("_QUEUE_URL"):
                ok = v in queue_urls
            elif k.endswith("_PARAM"):
                ok = v in ssm_names and bool(moto("ssm").get_parameter(Name=v, WithDecryption=True)["Parameter"]["Value"])
            elif k.endswith("_STATE_MACHINE_ARN"):
                ok = v in machines
            else:
                continue
            checked += 1
            if not ok:
                problems.append(f"{lid}: {k}={v} names nothing that exists")

    # Check 2: every IAM statement's resources are resources this stack created (or "*" where
    # AWS offers no resource-level permission, listed).
    known = set()
    for v in phys.values():
        for a in ("Arn", "Ref", "StreamArn"):
            if isinstance(v.get(a), str) and v[a].startswith("arn:"):
                known.add(v[a])
    known |= {f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{n}" for n in ssm_names}
    stars, stmts, managed = [], 0, set()
    for lid in types.get("AWS::IAM::Role", []):
        managed |= {m.rsplit("/", 1)[-1] for m in ev(res[lid]["Properties"].get("ManagedPolicyArns", []))}
        for pol in ev(res[lid]["Properties"].get("Policies", [])):
            for st in pol["PolicyDocument"]["Statement"]:
                stmts += 1
                rs = st.get("Resource", [])
                for r in rs if isinstance(rs, list) else [rs]:
                    if r == "*":
                        stars.append(f"{lid}: {','.join(as_list(st['Action']))}")
                    elif not any(r.rstrip("*") == k or r.startswith(k + "/") or r.startswith(k + ":") for k in known):
                        problems.append(f"{lid}: {pol['PolicyName']} grants on {r}, which the stack does not create")

    # Check 2b: each event bus exists in moto, and the only grant on it is events:PutEvents to
    # the outbox relay's role (the one function that publishes payment events).
    for lid in types.get("AWS::Events::EventBus", []):
        if lid not in phys:
            continue
        bus = phys[lid]
        moto("events").describe_event_bus(Name=bus["Ref"])
        grants = []
        for rl in types.get("AWS::IAM::Role", []):
            for pol in ev(res[rl]["Properties"].get("Policies", [])):
                for st in pol["PolicyDocument"]["Statement"]:
                    rs = st.get("Resource", [])
                    if bus["Arn"] in (rs if isinstance(rs, list) else [rs]):
                        grants.append((rl, tuple(as_list(st["Action"]))))
        if [a for _, a in grants] != [("events:PutEvents",)] or not grants[0][0].startswith("OutboxRelay"):
            problems.append(f"{lid}: grants {grants}, want exactly events:PutEvents to the outbox relay")
        else:
            created.append(f"checked  {lid} {bus['Ref']} exists; {grants[0][0]} alone may events:PutEvents on it")

    # Check 3: the alarm topic's key lets CloudWatch publish (read back from moto's KMS).
    emitters = json.loads(args.emitters)
    for lid in types.get("AWS::SNS::Topic", []):
        key = ev(res[lid]["Properties"].get("KmsMasterKeyId"))
        if not key:
            problems.append(f"{lid}: not encrypted")
            continue
        if key.startswith("alias/aws/"):
            problems.append(f"{lid}: encrypted with the AWS-managed {key}, whose policy cannot let CloudWatch publish")
            continue
        got = moto("sns").get_topic_attributes(TopicArn=phys[lid]["Ref"])["Attributes"].get("KmsMasterKeyId")
        policy = json.loads(moto("kms").get_key_policy(KeyId=key, PolicyName="default")["Policy"])
        ok = any(st.get("Effect") == "Allow" and "cloudwatch.amazonaws.com" in as_list(st.get("Principal", {}).get("Service", []))
                 and {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(as_list(st["Action"])) for st in policy["Statement"])
        if not ok or got != key:
            problems.append(f"{lid}: key {key} (topic says {got}) does not let cloudwatch.amazonaws.com use it")
        else:
            created.append(f"checked  {lid} is under key {key}; its key policy lets cloudwatch.amazonaws.com Decrypt and GenerateDataKey*")

    # Check 4: every alarm watches a metric something in the stack emits: AWS metrics of a
    # function, queue, state machine or API of this stack; Twice metrics written (EMF) by the
    # functions the test names.
    fn_names = {ev(res[l]["Properties"]["FunctionName"]): l for l in types.get("AWS::Lambda::Function", [])}
    queues = {phys[l]["QueueName"] for l in types.get("AWS::SQS::Queue", []) if l in phys}
    machines_ = {phys[l]["Ref"] for l in types.get("AWS::StepFunctions::StateMachine", []) if l in phys}
    apis = {phys[l]["Ref"] for l in types.get("AWS::ApiGatewayV2::Api", []) if l in phys}
    by_ns = {}
    for lid in types.get("AWS::CloudWatch::Alarm", []):
        p = ev(res[lid]["Properties"])
        ms = [dict(Namespace=p["Namespace"], MetricName=p["MetricName"], Dimensions=p.get("Dimensions", []))] if "MetricName" in p \
            else [m["MetricStat"]["Metric"] for m in p.get("Metrics", []) if "MetricStat" in m]
        for m in ms:
            dims = {d["Name"]: d["Value"] for d in m.get("Dimensions", [])}
            ns, name = m["Namespace"], m["MetricName"]
            who = None
            if ns == "AWS/Lambda":
                who = fn_names.get(dims.get("FunctionName")) and dims["FunctionName"].split("-", 2)[-1]
            elif ns == "AWS/SQS":
                who = "SQS" if dims.get("QueueName") in queues else None
            elif ns == "AWS/States":
                who = "Step Functions" if dims.get("StateMachineArn") in machines_ else None
            elif ns == "AWS/ApiGateway":
                who = "API Gateway" if dims.get("ApiId") in apis else None
            elif ns == "Twice":
                who = emitters.get(name) if dims.get("Stage") == args.stage else None
            if not who:
                problems.append(f"{lid}: watches {ns} {name} {dims}, which nothing in this stack emits")
            else:
                by_ns.setdefault(f"{ns} {name}" if ns == "Twice" else ns, set()).update(as_list(who))
    created.append("checked  every alarm's metric has an emitter: " + "; ".join(
        f"{k} by {', '.join(sorted(v)) if len(v) < 5 else str(len(v)) + ' functions'}" for k, v in sorted(by_ns.items())))

    # Check 5: every event source, the schedule, the API and the state machine invoke the
    # "live" alias, and every function has a canary with a rollback alarm.
    aliases = {l: ev(res[l]["Properties"]["FunctionName"]) for l in types.get("AWS::Lambda::Alias", [])}
    alias_of = {}  # function logical id -> alias logical id
    for l, r in res.items():
        if r["Type"] == "AWS::Lambda::Alias":
            fn = r["Properties"]["FunctionName"].get("Ref")
            alias_of[fn] = l
    def uses_alias(x):
        return any(a in json.dumps(x) for a in alias_of.values())
    sources = 0
    for lid in types.get("AWS::Lambda::EventSourceMapping", []) + types.get("AWS::Lambda::Permission", []):
        sources += 1
        if not uses_alias(res[lid]["Properties"]["FunctionName"]):
            problems.append(f"{lid}: invokes {res[lid]['Properties']['FunctionName']}, not its alias")
    for lid in types.get("AWS::Scheduler::Schedule", []):
        sources += 1
        if not uses_alias(res[lid]["Properties"]["Target"]["Arn"]):
            problems.append(f"{lid}: the schedule targets the function, not its alias")
    for lid in types.get("AWS::Lambda::EventInvokeConfig", []):
        if res[lid]["Properties"].get("Qualifier") != "live":
            problems.append(f"{lid}: on-failure destination set on {res[lid]['Properties'].get('Qualifier')}, not the alias")
    for lid in types.get("AWS::StepFunctions::StateMachine", []):
        sources += 1
        if not uses_alias(res[lid]["Properties"].get("DefinitionSubstitutions", {})):
            problems.append(f"{lid}: its tasks call the function, not its alias")
    for lid in types.get("AWS::ApiGatewayV2::Api", []):
        for path, methods in res[lid]["Properties"].get("Body", {}).get("paths", {}).items():
            for m, op in methods.items():
                sources += 1
                if not uses_alias(op.get("x-amazon-apigateway-integration", {}).get("uri")):
                    problems.append(f"{lid}: {m.upper()} {path} integrates the function, not its alias")
    groups = types.get("AWS::CodeDeploy::DeploymentGroup", [])
    for fn in types.get("AWS::Lambda::Function", []):
        if fn not in alias_of:
            problems.append(f"{fn}: no alias (AutoPublishAlias)")
        dg = res.get(fn + "DeploymentGroup")
        if not dg or not dg["Properties"].get("AlarmConfiguration", {}).get("Alarms"):
            problems.append(f"{fn}: no deployment group with rollback alarms")
        lvl = ev(res[fn]["Properties"].get("LoggingConfig", {})).get("ApplicationLogLevel", "INFO")
        if lvl not in ("TRACE", "DEBUG", "INFO", "WARN"):
            problems.append(f"{fn}: ApplicationLogLevel {lvl} filters out the WARN-level metric lines")
    created.append(f"checked  {sources} invokers (event sources, API routes, the schedule, the state machine) use a function's live alias; "
                   f"{len(groups)} deployment groups ({ev(params.get('DeploymentType'))}) roll back on their alarms")

    # Check 6: the concurrency toward the provider (template.yaml, beside the concurrency
    # parameters, states the rule). Every function's reservation is reported; with every
    # function that calls the provider (its environment names the Stripe key) under a ceiling,
    # reserved or on each of its SQS sources, the ceilings add up to at most
    # PROVIDER_CONCURRENCY. A function left unreserved (the parameters' default, for an account
    # whose concurrency limit is low) is reported, not refused.
    reserved = {}
    for fn in types.get("AWS::Lambda::Function", []):
        n = ev(res[fn]["Properties"].get("ReservedConcurrentExecutions"))
        if n is not None:
            reserved[ev(res[fn]["Properties"]["FunctionName"]).split("-", 2)[-1]] = int(n)
    if reserved:
        r = sum(reserved.values())
        created.append(f"checked  reserved concurrency: {', '.join(f'{k} {v}' for k, v in sorted(reserved.items()))}; "
                       f"needs an account concurrency limit of at least {100 + r} (100 + {r})")
    else:
        created.append("checked  reserved concurrency: none (no function sets ReservedConcurrentExecutions)")
    ceilings, unceiled, total = [], [], 0
    for fn in types.get("AWS::Lambda::Function", []):
        p = res[fn]["Properties"]
        if "TWICE_STRIPE_API_KEY_PARAM" not in p.get("Environment", {}).get("Variables", {}):
            continue
        name = ev(p["FunctionName"]).split("-", 2)[-1]
        if name in reserved:
            ceilings.append(f"{name} {reserved[name]} reserved")
            total += reserved[name]
            continue
        maps = [res[l]["Properties"] for l in types.get("AWS::Lambda::EventSourceMapping", [])
                if fn in json.dumps(res[l]["Properties"]["FunctionName"])]
        caps = [ev(m.get("ScalingConfig", {})).get("MaximumConcurrency") for m in maps]
        if not maps or None in caps:
            unceiled.append(name)
            continue
        n = sum(int(c) for c in caps)
        ceilings.append(f"{name} {n} (SQS MaximumConcurrency)")
        total += n
    if total > PROVIDER_CONCURRENCY:
        problems.append(f"provider-calling concurrency adds up to {total}, over {PROVIDER_CONCURRENCY}")
    if unceiled:
        created.append(f"checked  paths to the provider without a ceiling (the account's limit only): {', '.join(sorted(unceiled))}; "
                       f"with one: {', '.join(sorted(ceilings)) or 'none'}")
    else:
        created.append(f"checked  every path to the provider has a ceiling: {', '.join(sorted(ceilings))}; total {total} <= {PROVIDER_CONCURRENCY}")

    print("== deploy rehearsal (stage %s): %d CloudFormation resources after the SAM transform" % (args.stage, len(res)))
    for c in created:
        print("   " + (c if c.startswith("checked  ") else "created  " + c))
    for l in lacks:
        print("   skipped  " + l)
    print(f"   checked  {checked} environment references of {len(types.get('AWS::Lambda::Function', []))} functions: "
          f"{'all exist' if not [p for p in problems if 'names nothing' in p] else 'FAILURES'}")
    print(f"   checked  {stmts} IAM statements: every ARN is a resource of this stack; '*' only for: "
          + ("; ".join(sorted(set(s.split(': ', 1)[1] for s in stars))) or "none"))
    print("   note     AWS managed policies SAM attaches: " + ", ".join(sorted(managed)))
    for p in problems:
        print("   PROBLEM  " + p)
    return 1 if problems else 0


def as_list(x):
    return x if isinstance(x, list) else [x]


def cond(c, params):
    if isinstance(c, dict):
        (k, v), = c.items()
        if k == "Fn::Equals":
            a, b = [params.get(x["Ref"]) if isinstance(x, dict) and "Ref" in x else x for x in v]
            return str(a) == str(b)
        if k == "Fn::Not":
            return not cond(v[0], params)
        if k == "Fn::And":
            return all(cond(x, params) for x in v)
        if k == "Fn::Or":
            return any(cond(x, params) for x in v)
    return bool(c)


PSEUDO = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": PARTITION,
          "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "twice-rehearsal",
          "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/twice-rehearsal/6b1c9d2e-0000-4000-8000-000000000000", "AWS::NoValue": None}


def resolve(x, params, phys, conds):
    r = lambda y: resolve(y, params, phys, conds)
    if isinstance(x, list):
        return [v for v in (r(i) for i in x) if v is not None]
    if not isinstance(x, dict):
        return x
    if len(x) == 1:
        (k, v), = x.items()
        if k == "Ref":
            if v in PSEUDO:
                return PSEUDO[v]
            if v in params:
                return params[v]
            if v in phys:
                return phys[v]["Ref"]
            raise Unresolved(v)
        if k == "Fn::GetAtt":
            lid, att = v if isinstance(v, list) else v.split(".", 1)
            if lid in phys and att in phys[lid]:
                return phys[lid][att]
            raise Unresolved(f"{lid}.{att}")
        if k == "Fn::Sub":
            s, extra = (v, {}) if isinstance(v, str) else (v[0], r(v[1]))
            def sub(m):
                name = m.group(1)
                if name in extra:
                    return str(extra[name])
                if "." in name:
                    return str(r({"Fn::GetAtt": name.split(".", 1)}))
                return str(r({"Ref": name}))
            return re.sub(r"\$\{([^}!]+)\}", sub, s)
        if k == "Fn::Join":
            return v[0].join(str(i) for i in r(v[1]))
        if k == "Fn::If":
            return r(v[1]) if conds.get(v[0]) else r(v[2])
        if k == "Fn::Split":
            return r(v[1]).split(v[0])
        if k == "Fn::Select":
            return r(v[1])[int(v[0])]
    return {k: r(v) for k, v in x.items()}


def arn(svc, rest):
    return f"arn:{PARTITION}:{svc}:{REGION}:{ACCOUNT}:{rest}"


def make_table(ddb, lid, p, ev, phys, lacks):
    p = ev(p)
    kw = {k: p[k] for k in ("TableName", "AttributeDefinitions", "KeySchema", "BillingMode") if k in p}
    if "GlobalSecondaryIndexes" in p:
        kw["GlobalSecondaryIndexes"] = p["GlobalSecondaryIndexes"]
    kw["SSESpecification"] = {"Enabled": p.get("SSESpecification", {}).get("SSEEnabled", False)}
    kw["DeletionProtectionEnabled"] = bool(p.get("DeletionProtectionEnabled"))
    if p.get("StreamSpecification"):
        kw["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": p["StreamSpecification"]["StreamViewType"]}
    created = ddb.create_table(**kw)["TableDescription"]
    if p.get("TimeToLiveSpecification"):
        t = p["TimeToLiveSpecification"]
        ddb.update_time_to_live(TableName=p["TableName"], TimeToLiveSpecification={"AttributeName": t["AttributeName"], "Enabled": t["Enabled"]})
    if p.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled"):
        try:
            ddb.update_continuous_backups(TableName=p["TableName"], PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
        except Exception as e:
            code = getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)
            msg = "DynamoDB Local: UpdateContinuousBackups (point-in-time recovery) answers " + code + "; PITR declared, not exercised"
            if msg not in lacks:
                lacks.append(msg)
    phys[lid] = {"Ref": p["TableName"], "Arn": arn("dynamodb", "table/" + p["TableName"])}
    if created.get("LatestStreamArn"):
        phys[lid]["StreamArn"] = created["LatestStreamArn"]


def make_queue(sqs, lid, p, ev, phys):
    p = ev(p)
    attrs = {}
    for k in ("VisibilityTimeout", "MessageRetentionPeriod", "SqsManagedSseEnabled", "DelaySeconds"):
        if k in p:
            attrs[k] = str(p[k]).lower() if isinstance(p[k], bool) else str(p[k])
    for k in ("RedrivePolicy", "RedriveAllowPolicy"):
        if k in p:
            attrs[k] = json.dumps(p[k])
    url = sqs.create_queue(QueueName=p["QueueName"], Attributes=attrs)["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    for k in ("RedrivePolicy", "RedriveAllowPolicy"):
        if k in p and json.loads(got.get(k, "{}")) != json.loads(attrs[k]) and \
           json.loads(got.get(k, "{}")).get("maxReceiveCount", None) != p[k].get("maxReceiveCount", None):
            raise SystemExit(f"{lid}: {k} not kept by SQS: {got.get(k)}")
    phys[lid] = {"Ref": url, "Arn": got["QueueArn"], "QueueName": p["QueueName"], "QueueUrl": url}


def make_log_group(logs, lid, p, ev, phys):
    p = ev(p)
    logs.create_log_group(logGroupName=p["LogGroupName"])
    if "RetentionInDays" in p:
        logs.put_retention_policy(logGroupName=p["LogGroupName"], retentionInDays=int(p["RetentionInDays"]))
    phys[lid] = {"Ref": p["LogGroupName"], "Arn": arn("logs", "log-group:" + p["LogGroupName"] + ":*")}


phys_stage = ["rehearsal"]


def make_role(iam, lid, p, ev, phys):
    p = ev(p)  # raises Unresolved until every resource a policy names exists
    name = f"{phys_stage[0]}-{lid}"[:64]
    r = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(p["AssumeRolePolicyDocument"]))
    for pol in p.get("Policies", []):
        # SAM's policy templates omit Version (IAM then assumes 2008-10-17); moto insists.
        pol["PolicyDocument"].setdefault("Version", "2012-10-17")
        iam.put_role_policy(RoleName=name, PolicyName=pol["PolicyName"], PolicyDocument=json.dumps(pol["PolicyDocument"]))
    phys[lid] = {"Ref": name, "Arn": r["Role"]["Arn"]}


def make_function(lid, p, ev, phys):
    p = ev(p)
    phys[lid] = {"Ref": p["FunctionName"], "Arn": arn("lambda", "function:" + p["FunctionName"])}


def make_state_machine(sfn, lid, p, ev, phys):
    p = ev(p)
    d = p.get("DefinitionString") or json.dumps(p["Definition"])
    for k, v in (p.get("DefinitionSubstitutions") or {}).items():
        d = d.replace("${" + k + "}", str(v))
    if "${" in d:
        raise SystemExit(f"{lid}: unsubstituted placeholder left in the definition")
    kw = dict(name=p["StateMachineName"], definition=d, roleArn=p["RoleArn"], type=p.get("StateMachineType", "STANDARD"))
    if "TracingConfiguration" in p:
        kw["tracingConfiguration"] = {"enabled": p["TracingConfiguration"]["Enabled"]}
    if "LoggingConfiguration" in p:
        lc = p["LoggingConfiguration"]
        kw["loggingConfiguration"] = {"level": lc["Level"], "includeExecutionData": lc["IncludeExecutionData"],
            "destinations": [{"cloudWatchLogsLogGroup": {"logGroupArn": d_["CloudWatchLogsLogGroup"]["LogGroupArn"]}} for d_ in lc["Destinations"]]}
    a = sfn.create_state_machine(**kw)["stateMachineArn"]
    phys[lid] = {"Ref": a, "Arn": a, "Name": p["StateMachineName"]}


def make_api(apigw, lid, p, ev, phys):
    p = ev(p)
    body = p.get("Body", {})
    api = apigw.create_api(Name=body.get("info", {}).get("title", lid), ProtocolType="HTTP")
    routes = []
    for path, methods in body.get("paths", {}).items():
        for m in methods:
            key = ("ANY" if m == "x-amazon-apigateway-any-method" else m.upper()) + " " + path
            apigw.create_route(ApiId=api["ApiId"], RouteKey=key)
            sec = methods[m].get("security")
            routes.append(key + (" [" + ",".join(k for d in sec for k in d) + "]" if sec else " [no authorizer]"))
    phys[lid] = {"Ref": api["ApiId"], "ApiEndpoint": api["ApiEndpoint"], "Routes": routes}
    print("   routes   " + ", ".join(sorted(routes)))


def make_schedule(sch, lid, p, ev, phys):
    p = ev(p)
    t = p["Target"]
    target = {"Arn": t["Arn"], "RoleArn": t["RoleArn"]}
    if "Input" in t:
        target["Input"] = t["Input"]
    if "RetryPolicy" in t:
        target["RetryPolicy"] = t["RetryPolicy"]
    sch.create_schedule(Name=p["Name"], ScheduleExpression=p["ScheduleExpression"],
                        FlexibleTimeWindow=p["FlexibleTimeWindow"], Target=target)
    phys[lid] = {"Ref": p["Name"], "Arn": arn("scheduler", "schedule/default/" + p["Name"])}


def make_alarm(cw, lid, p, ev, phys):
    p = ev(p)
    kw = {k: p[k] for k in ("AlarmName", "AlarmDescription", "ComparisonOperator", "Threshold", "EvaluationPeriods",
                             "DatapointsToAlarm", "TreatMissingData", "AlarmActions", "OKActions", "Metrics",
                             "Namespace", "MetricName", "Dimensions", "Statistic", "Period") if k in p}
    for k in ("EvaluationPeriods", "DatapointsToAlarm", "Period"):
        if k in kw:
            kw[k] = int(kw[k])
    kw["Threshold"] = float(kw["Threshold"])
    cw.put_metric_alarm(**kw)
    phys[lid] = {"Ref": p["AlarmName"], "Arn": arn("cloudwatch", "alarm:" + p["AlarmName"])}


def make_topic(sns, lid, p, ev, phys):
    p = ev(p)
    attrs = {"KmsMasterKeyId": p["KmsMasterKeyId"]} if p.get("KmsMasterKeyId") else {}
    phys[lid] = {"Ref": sns.create_topic(Name=p["TopicName"], Attributes=attrs)["TopicArn"]}


def make_event_bus(events, lid, p, ev, phys):
    p = ev(p)
    a = events.create_event_bus(Name=p["Name"])["EventBusArn"]
    phys[lid] = {"Ref": p["Name"], "Arn": a, "Name": p["Name"]}


def make_key(kms, lid, p, ev, phys):
    p = ev(p)
    k = kms.create_key(Policy=json.dumps(p["KeyPolicy"]), Description=p.get("Description", ""))["KeyMetadata"]
    if p.get("EnableKeyRotation"):
        kms.enable_key_rotation(KeyId=k["KeyId"])
    phys[lid] = {"Ref": k["KeyId"], "Arn": k["Arn"]}


def make_key_alias(kms, lid, p, ev, phys):
    p = ev(p)
    kms.create_alias(AliasName=p["AliasName"], TargetKeyId=p["TargetKeyId"])
    phys[lid] = {"Ref": p["AliasName"]}


def make_dashboard(cw, lid, p, ev, phys):
    p = ev(p)
    body = json.loads(p["DashboardBody"])  # the body must be JSON after substitution
    cw.put_dashboard(DashboardName=p["DashboardName"], DashboardBody=json.dumps(body))
    phys[lid] = {"Ref": p["DashboardName"], "Widgets": len(body["widgets"])}


def make_codedeploy_app(cd, lid, p, ev, phys):
    p = ev(p)
    name = p.get("ApplicationName") or f"{phys_stage[0]}-{lid}"
    cd.create_application(applicationName=name, computePlatform=p.get("ComputePlatform", "Lambda"))
    phys[lid] = {"Ref": name}


def make_deployment_group(cd, lid, p, ev, phys, lacks):
    p = ev(p)
    name = p.get("DeploymentGroupName") or f"{phys_stage[0]}-{lid}"[:100]
    kw = dict(applicationName=p["ApplicationName"], deploymentGroupName=name, serviceRoleArn=p["ServiceRoleArn"],
              deploymentConfigName=p["DeploymentConfigName"],
              deploymentStyle={"deploymentType": p["DeploymentStyle"]["DeploymentType"], "deploymentOption": p["DeploymentStyle"]["DeploymentOption"]})
    ac = p.get("AlarmConfiguration")
    if ac:
        kw["alarmConfiguration"] = {"enabled": bool(ac.get("Enabled", True)), "alarms": [{"name": a["Name"]} for a in ac["Alarms"]]}
    ar = p.get("AutoRollbackConfiguration")
    if ar:
        kw["autoRollbackConfiguration"] = {"enabled": bool(ar["Enabled"]), "events": ar["Events"]}
    cd.create_deployment_group(**kw)
    phys[lid] = {"Ref": name}


def make_version(lid, p, ev, phys):
    p = ev(p)
    phys[lid] = {"Ref": arn("lambda", f"function:{p['FunctionName']}:1"), "Version": "1"}


def make_alias(lid, p, ev, phys):
    p = ev(p)
    a = arn("lambda", f"function:{p['FunctionName']}:{p['Name']}")
    phys[lid] = {"Ref": a, "Arn": a}


if __name__ == "__main__":
    sys.exit(main())
