// Who may use the operators' console: an Entra ID app registration for App Service
// Authentication, with the app role an operator is assigned (Outbox.Operator: the role
// cosmos-outbox's signed-in door checks, cosmos_outbox/_console/identity.py), and no secret: App
// Service Authentication signs in as the app's user-assigned managed identity, which the
// registration trusts through a federated identity credential (Microsoft Learn, "Configure your
// App Service or Azure Functions app to use Microsoft Entra sign-in": "Use a managed identity
// instead of a secret"; the app setting OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID, functionapp.bicep).
//
// Entra ID objects are Microsoft Graph resources, not Azure ones: this module uses the Microsoft
// Graph Bicep extension, and the deploying identity needs the right to register applications
// (Entra ID's default for members, or the Application Developer role). Without it, deploy with
// operatorsSignIn=false (main.bicep): the operators' routes then take the admin key only. The
// extension's version is named in deploy/bicepconfig.json.
extension microsoftGraphV1

@description('Unique name (and display name) of the app registration in the tenant.')
param registrationName string

@description('Host name of the app that serves the operators\' console (its routes run beside the relay): App Service Authentication\'s callback is https://<host>/.auth/login/aad/callback.')
param consoleHostName string

@description('Principal id of the app\'s user-assigned managed identity: App Service Authentication signs in to Entra ID as it (federated credential, no client secret).')
param identityPrincipalId string

@description('Object id of a user given the operator role now (azd: the deploying user). Empty: none; assign operators in Entra ID (Enterprise applications > the registration > Users and groups).')
param operatorPrincipalId string = ''

@description('The app role an operator is assigned; the app checks it (operators_blueprint(operator_role=...) if not the default).')
param operatorRole string = 'Outbox.Operator'

var operatorRoleId = guid(registrationName, operatorRole)
// Microsoft Graph's User.Read (delegated): the sign-in reads the user's profile.
var microsoftGraphAppId = '00000003-0000-0000-c000-000000000000'
var userReadScopeId = 'e1fe6dd8-ba31-4d61-89e7-88639da4683d'

resource registration 'Microsoft.Graph/applications@v1.0' = {
  uniqueName: registrationName
  displayName: registrationName
  signInAudience: 'AzureADMyOrg'
  web: {
    redirectUris: [
      'https://${consoleHostName}/.auth/login/aad/callback'
    ]
    implicitGrantSettings: {
      enableIdTokenIssuance: true
    }
  }
  appRoles: [
    {
      id: operatorRoleId
      value: operatorRole
      displayName: 'Outbox operator'
      description: 'Uses the outbox\'s operators\' console: replays and discards quarantined events, re-drives events.'
      // users sign in to the console; an application (a script with an Entra ID token) may too
      allowedMemberTypes: [
        'User'
        'Application'
      ]
      isEnabled: true
    }
  ]
  requiredResourceAccess: [
    {
      resourceAppId: microsoftGraphAppId
      resourceAccess: [
        {
          id: userReadScopeId
          type: 'Scope'
        }
      ]
    }
  ]
}

resource managedIdentityCredential 'Microsoft.Graph/applications/federatedIdentityCredentials@v1.0' = {
  name: '${registration.uniqueName}/app-service-authentication'
  description: 'App Service Authentication of the app that serves the operators\' console signs in as its managed identity'
  issuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
  subject: identityPrincipalId
  audiences: [
    'api://AzureADTokenExchange'
  ]
}

resource servicePrincipal 'Microsoft.Graph/servicePrincipals@v1.0' = {
  appId: registration.appId
}

resource operator 'Microsoft.Graph/appRoleAssignedTo@v1.0' = if (!empty(operatorPrincipalId)) {
  appRoleId: operatorRoleId
  principalId: operatorPrincipalId
  resourceId: servicePrincipal.id
}

output clientId string = registration.appId
output operatorRole string = operatorRole
