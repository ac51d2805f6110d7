#!/usr/bin/env python3
"""The HTTP API's route table as API Gateway receives it: template.yaml after the SAM
transform (the OpenAPI body SAM writes for AWS::ApiGatewayV2::Api), one JSON object per route:
method ("ANY" for x-amazon-apigateway-any-method), path, the function it integrates (its
FunctionName after the stage: operator-api), the authorizer ("" for none) with its type and
JWT configuration, and the route's authorization scopes, parameters resolved.

Usage: routes.py --template template.yaml [--param Name=Value ...]
"""
import argparse, json, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rehearse import REHEARSAL_PARAMS, transform  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", required=True)
    ap.add_argument("--param", action="append", default=[], help="a template parameter, Name=Value (repeatable)")
    args = ap.parse_args()
    overrides = dict(REHEARSAL_PARAMS)
    overrides.update(kv.split("=", 1) for kv in args.param)
    cfn, params = transform(args.template, overrides)
    res = cfn["Resources"]

    def value(x):
        if isinstance(x, dict) and set(x) == {"Ref"}:
            return params[x["Ref"]]
        if isinstance(x, dict) and set(x) == {"Fn::Split"}:
            sep, s = x["Fn::Split"]
            return value(s).split(sep)
        if isinstance(x, list):
            return [value(i) for i in x]
        return x

    def function_of(uri):
        # ${OperatorApiFunctionAliaslive} -> the alias -> its function -> twice-${Stage}-operator-api
        m = re.search(r"/functions/\$\{([A-Za-z0-9]+)\}/invocations", json.dumps(uri))
        if not m:
            raise SystemExit(f"integration {uri}: not a Lambda proxy integration")
        lid = m.group(1)
        if res[lid]["Type"] == "AWS::Lambda::Alias":
            lid = res[lid]["Properties"]["FunctionName"]["Ref"]
        name = res[lid]["Properties"]["FunctionName"]
        name = name.get("Fn::Sub", name) if isinstance(name, dict) else name
        return name.split("}-", 1)[-1]

    out = []
    for lid, r in sorted(res.items()):
        if r["Type"] != "AWS::ApiGatewayV2::Api":
            continue
        body = r["Properties"]["Body"]
        schemes = body.get("components", {}).get("securitySchemes", {})
        for path, methods in sorted(body.get("paths", {}).items()):
            for m, op in sorted(methods.items()):
                route = {"method": "ANY" if m == "x-amazon-apigateway-any-method" else m.upper(), "path": path,
                         "function": function_of(op["x-amazon-apigateway-integration"]["uri"]),
                         "authorizer": "", "scopes": []}
                for sec in op.get("security", []):
                    for name, scopes in sec.items():
                        if name == "NONE":
                            continue
                        a = schemes[name]["x-amazon-apigateway-authorizer"]
                        route["authorizer"], route["authorizer_type"] = name, a["type"]
                        route["scopes"] = [value(s) for s in scopes]
                        if a["type"] == "jwt":
                            jc = a["jwtConfiguration"]
                            route["issuer"], route["audience"] = value(jc["issuer"]), value(jc["audience"])
                out.append(route)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
